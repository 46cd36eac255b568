/**
 * A tiny element builder. Text always goes in as text (never as HTML): job names, reasons and
 * logs come from users.
 */
export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | undefined | null> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) {
      continue;
    }
    if (k === 'class') {
      el.className = String(v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

/** The nodes `children` stand for: text as text nodes, the empty ones left out. */
export function toNodes(children: Child[]): Node[] {
  return children
    .filter((c): c is Node | string => c !== null && c !== undefined && c !== false)
    .map(c => (typeof c === 'string' ? document.createTextNode(c) : c));
}

export function append(parent: Node, children: Child[]): void {
  for (const node of toNodes(children)) {
    parent.appendChild(node);
  }
}

/**
 * Make `parent`'s children exactly `nodes`, in order, moving only what is out of place: a
 * child that stays is never detached (a button keeps the press a person began on it).
 */
export function reorder(parent: Node, nodes: readonly Node[]): void {
  const kept = new Set(nodes);
  for (const child of Array.from(parent.childNodes)) {
    if (!kept.has(child)) {
      parent.removeChild(child);
    }
  }
  let cursor = parent.firstChild;
  for (const node of nodes) {
    if (node === cursor) {
      cursor = cursor.nextSibling;
    } else {
      parent.insertBefore(node, cursor);
    }
  }
  while (cursor) {
    const next = cursor.nextSibling;
    parent.removeChild(cursor);
    cursor = next;
  }
}
