/**
 * The admin page's entry point (bundled into `jupyter_elastic_gpu/server/static/admin/admin.js`,
 * which `admin_page.py` inlines into the page): reads the config the server put in the page
 * and starts following the scheduler.
 */
import { AdminClient } from './client';
import { AdminPage, IAdminConfig } from './page';

function start(): void {
  const config: IAdminConfig = JSON.parse(document.body.dataset.config ?? '{}');
  const client = new AdminClient({
    api: config.api,
    // The shared scheduler has no login cookie: a page opened with ?token= sends it on.
    token: new URLSearchParams(window.location.search).get('token'),
    xsrf: config.xsrf || null,
    cookies: () => document.cookie,
    fetch: (input, init) => window.fetch(input, init)
  });
  const page = new AdminPage(document, client, {
    confirm: text => window.confirm(text),
    wait: ms => new Promise(resolve => window.setTimeout(resolve, ms))
  });
  document.getElementById('who')!.textContent = `${config.user} (admin, ${config.mode} scheduler)`;
  void page.follow();
}

start();
