// The admin page's script: reads the scheduler's API, draws the GPUs, the jobs and usage
// against share, and calls the admin actions. Everything it shows comes from the API; text
// from the server is put in as text, never as HTML.
(() => {
  'use strict';

  const config = JSON.parse(document.body.dataset.config);
  // The shared scheduler has no login cookie: a page opened with ?token= sends it on.
  const token = new URLSearchParams(window.location.search).get('token');
  // Seconds a long poll of `updates` waits: at the latest then, utilisation is drawn again.
  const POLL_S = 10;
  const RETRY_MS = 3000;

  const byId = id => document.getElementById(id);

  function cookie(name) {
    const found = document.cookie.split('; ').find(c => c.startsWith(name + '='));
    return found ? decodeURIComponent(found.slice(name.length + 1)) : null;
  }

  async function api(method, path, body) {
    const headers = { 'Content-Type': 'application/json' };
    if (token) headers.Authorization = `token ${token}`;
    if (method !== 'GET') {
      const xsrf = cookie('_xsrf') || config.xsrf;
      if (xsrf) headers['X-XSRFToken'] = xsrf;
    }
    const response = await fetch(config.api + path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body)
    });
    let doc = null;
    try {
      doc = await response.json();
    } catch (e) {
      doc = null;
    }
    if (!response.ok) {
      const error = new Error(
        (doc && doc.message) || `${method} ${path} answered ${response.status}`
      );
      error.status = response.status;
      throw error;
    }
    return doc;
  }

  // An element with attributes (`on*` keys are listeners) and children (strings are text).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(typeof child === 'string' || typeof child === 'number' ? String(child) : child);
    }
    return el;
  }

  function say(text, ok) {
    const box = byId('message');
    box.textContent = text;
    box.className = 'jp-ElasticAdmin-message' + (ok ? ' ok' : '');
    box.hidden = !text;
  }

  const percent = x => (x === null || x === undefined ? '–' : `${Math.round(x * 100)}%`);
  const number = x => (x === null || x === undefined ? '–' : String(Math.round(x * 100) / 100));
  // A half-life as people say it: "7 days", "36 h", "20 min".
  const duration = s =>
    s >= 2 * 86400 ? `${number(s / 86400)} days` : s >= 3600 ? `${number(s / 3600)} h` : `${number(s / 60)} min`;
  const isFinal = state => ['done', 'failed', 'cancelled'].includes(state);

  // Replace a table's rows, keeping what is typed into a field of it that has the focus.
  function fill(tableId, rows, columns, emptyText) {
    const body = byId(tableId).tBodies[0];
    const focused = document.activeElement;
    const key = focused && body.contains(focused) ? focused.dataset.key : null;
    const typed = key ? focused.value : null;
    body.replaceChildren(
      ...(rows.length ? rows : [h('tr', {}, h('td', { class: 'empty', colspan: columns }, emptyText))])
    );
    if (key) {
      const again = body.querySelector(`[data-key="${CSS.escape(key)}"]`);
      if (again) {
        again.value = typed;
        again.focus();
      }
    }
  }

  // -- actions ------------------------------------------------------------------------------
  async function act(what, call, confirmText) {
    if (confirmText && !window.confirm(confirmText)) return;
    say('');
    try {
      await call();
      say(what, true);
    } catch (e) {
      say(`${what} failed: ${e.message}`);
    }
    await refresh();
  }

  const post = (path, body) => () => api('POST', path, body === undefined ? {} : body);

  function drainButton(gpu) {
    if (gpu.drained) {
      return h(
        'button',
        { 'data-action': 'undrain', onclick: () => act(`GPU ${gpu.id} is back in service`, post(`gpus/${gpu.id}/drain`, { drained: false })) },
        'Undrain'
      );
    }
    const holder = gpu.holder ? ` Job ${gpu.holder} (${gpu.holder_user}) moves to other GPUs.` : '';
    return h(
      'button',
      {
        'data-action': 'drain',
        class: 'danger',
        onclick: () =>
          act(
            `GPU ${gpu.id} drained`,
            post(`gpus/${gpu.id}/drain`, { drained: true }),
            `Drain GPU ${gpu.id} for maintenance? No job will get it.${holder}`
          )
      },
      'Drain'
    );
  }

  function jobActions(job) {
    if (isFinal(job.state)) return [];
    const who = `job ${job.id} (${job.name}) of ${job.user}`;
    const buttons = [];
    if (job.held) {
      buttons.push(h('button', { 'data-action': 'resume', onclick: () => act(`Resumed ${who}`, post(`jobs/${job.id}/resume`)) }, 'Resume'));
    } else if (job.state !== 'stopping') {
      buttons.push(
        h(
          'button',
          {
            'data-action': 'suspend',
            onclick: () =>
              act(`Suspended ${who}`, post(`jobs/${job.id}/suspend`), `Suspend ${who}? It checkpoints, stops and gets no GPUs until resumed.`)
          },
          'Suspend'
        )
      );
    }
    buttons.push(
      h(
        'button',
        {
          'data-action': 'cancel',
          class: 'danger',
          onclick: () => act(`Cancelled ${who}`, post(`jobs/${job.id}/cancel`), `Cancel ${who}? It stops for good.`)
        },
        'Cancel'
      )
    );
    return buttons;
  }

  function priorityCell(job) {
    if (isFinal(job.state)) return number(job.priority);
    const key = `priority-${job.id}`;
    const input = h('input', { type: 'number', min: '0.01', max: '100', step: 'any', value: job.priority, 'data-key': key, 'aria-label': `priority of ${job.id}` });
    const set = () =>
      act(`Priority of job ${job.id} set to ${input.value}`, post(`jobs/${job.id}/priority`, { priority: Number(input.value) }));
    input.addEventListener('keydown', e => {
      if (e.key === 'Enter') set();
    });
    return [input, ' ', h('button', { 'data-action': 'priority', onclick: set }, 'Set')];
  }

  // -- drawing ------------------------------------------------------------------------------
  function drawGpus(doc) {
    const rows = doc.gpus.map(gpu => {
      const states = [];
      if (gpu.drained) states.push(h('span', { class: 'jp-ElasticAdmin-badge drained' }, gpu.holder ? 'draining' : 'drained'));
      if (!gpu.healthy) {
        const users = [...new Set(gpu.external_processes.map(p => p.user || 'unknown'))].join(', ');
        states.push(h('span', { class: 'jp-ElasticAdmin-badge busy', title: 'processes the scheduler did not start' }, `busy (${users})`));
      }
      if (!states.length) states.push(gpu.holder ? 'in use' : 'free');
      const holder = gpu.holder ? `${gpu.holder_user}: ${gpu.holder_name || gpu.holder}` : '–';
      const memory =
        gpu.memory_total_mb ? `${Math.round(gpu.memory_used_mb || 0)} / ${Math.round(gpu.memory_total_mb)} MiB` : '–';
      return h(
        'tr',
        { 'data-gpu-id': gpu.id },
        h('td', {}, gpu.id),
        h('td', {}, gpu.name),
        h('td', {}, holder),
        h('td', {}, percent(gpu.utilization)),
        h('td', {}, memory),
        h('td', { class: 'state' }, states),
        h('td', {}, drainButton(gpu))
      );
    });
    fill('gpus', rows, 7, 'no GPUs');
  }

  function drawJobs(doc) {
    const jobs = [...doc.jobs].sort((a, b) => {
      const fa = isFinal(a.state), fb = isFinal(b.state);
      if (fa !== fb) return fa ? 1 : -1;
      return fa ? (b.finished_at || 0) - (a.finished_at || 0) : a.submitted_at - b.submitted_at;
    });
    const rows = jobs.map(job => {
      const state = [job.state];
      if (job.held) state.push(' ', h('span', { class: 'jp-ElasticAdmin-badge held' }, 'held'));
      return h(
        'tr',
        { 'data-job-id': job.id, 'data-state': job.state },
        h('td', {}, job.id),
        h('td', {}, job.user),
        h('td', {}, job.name || '–'),
        h('td', { class: 'state' }, state),
        h('td', {}, job.gpus.length ? job.gpus.join(', ') : '–', ` (${job.min_gpus}–${job.max_gpus})`),
        h('td', {}, priorityCell(job)),
        h('td', { class: 'reason' }, job.reason || ''),
        h('td', {}, jobActions(job))
      );
    });
    fill('jobs', rows, 8, 'no jobs');
  }

  function drawShares(doc) {
    byId('shares').hidden = false;
    byId('shares-note').textContent =
      `${doc.gpus} usable GPUs; usage decays with a half-life of ${duration(doc.half_life_s)}.`;
    const users = doc.users.map(u =>
      h(
        'tr',
        { 'data-user': u.user },
        h('td', {}, u.user),
        h('td', {}, u.groups.join(', ') || '–'),
        h('td', {}, number(u.weight)),
        h('td', {}, percent(u.share)),
        h('td', {}, String(u.entitled_gpus)),
        h('td', {}, String(u.gpus)),
        h('td', {}, percent(u.usage_fraction)),
        h('td', {}, `${number(u.ratio)}×`)
      )
    );
    fill('share-users', users, 8, 'no usage yet');
    const groups = doc.groups.map(g => {
      const key = `weight-${g.group}`;
      const input = h('input', { type: 'number', min: '0.01', max: '1000', step: 'any', value: g.weight, 'data-key': key, 'aria-label': `weight of ${g.group}` });
      const set = () =>
        act(
          `Weight of group ${g.group} set to ${input.value}`,
          () => api('PUT', `admin/groups/${encodeURIComponent(g.group)}/weight`, { weight: Number(input.value) })
        );
      input.addEventListener('keydown', e => {
        if (e.key === 'Enter') set();
      });
      return h(
        'tr',
        { 'data-group': g.group },
        h('td', {}, g.group),
        h('td', {}, input, ' ', h('button', { 'data-action': 'weight', onclick: set }, 'Set')),
        h('td', {}, g.users.join(', ') || '–'),
        h('td', {}, String(g.gpus)),
        h('td', {}, percent(g.usage_fraction))
      );
    });
    fill('share-groups', groups, 5, 'no groups (weights come from JupyterHub groups)');
  }

  async function refreshShares() {
    try {
      drawShares(await api('GET', 'admin/shares'));
    } catch (e) {
      byId('shares').hidden = true;
      byId('shares-note').textContent =
        e.status === 404 ? 'Fair share is not available on this scheduler.' : `Usage against share cannot be shown: ${e.message}`;
    }
  }

  let refreshing = null;
  // One refresh at a time; a call while one runs waits for it and then draws again.
  async function refresh() {
    while (refreshing) {
      try {
        await refreshing;
      } catch (e) {
        // the caller of that refresh says why it failed
      }
    }
    refreshing = (async () => {
      const [gpus, jobs] = await Promise.all([api('GET', 'gpus'), api('GET', 'jobs')]);
      drawGpus(gpus);
      drawJobs(jobs);
      await refreshShares();
    })();
    try {
      await refreshing;
    } finally {
      refreshing = null;
    }
  }

  async function follow() {
    let version = -1;
    for (;;) {
      try {
        const update = await api('GET', `updates?since=${version}&timeout=${POLL_S}`);
        version = update.version;
        await refresh();
        byId('live').textContent = `live (state ${version})`;
      } catch (e) {
        byId('live').textContent = `reconnecting: ${e.message}`;
        await new Promise(resolve => setTimeout(resolve, RETRY_MS));
      }
    }
  }

  byId('who').textContent = `${config.user} (admin, ${config.mode} scheduler)`;
  follow();
})();
