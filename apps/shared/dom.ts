// DOM helpers every app uses.

/** The element with this id (the pages are static: a missing id is a bug the first test finds). */
export const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** Text made safe to put inside HTML. */
export function esc(s: unknown): string {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Rows of a two-column key/value table body. */
export function kvRows(rows: [string, string][]): string {
  return rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td data-figure="${esc(k)}">${esc(v)}</td></tr>`).join('');
}
