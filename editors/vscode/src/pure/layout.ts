// How the transcript page is laid out in the DOM: element ids of rows, parts and containers, and
// the chunks rows are grouped in. Shared by the renderer (render.ts) and the webview's script.

/** Rows per chunk: the unit the webview skips laying out while it is off screen. */
export const CHUNK_ROWS = 50;

/** The DOM id of a row or part with this key. */
export function domId(key: string): string {
  return `pw-${key}`;
}

/** The DOM id of the element a container's rows go into (inside chunks). */
export function containerId(key: string): string {
  return `pw-c-${key}`;
}

/** Rows grouped into chunks, as the webview keeps them. */
export function chunked(rows: readonly string[]): string {
  let out = '';
  for (let i = 0; i < rows.length; i += CHUNK_ROWS) out += `<div class="chunk">${rows.slice(i, i + CHUNK_ROWS).join('')}</div>`;
  return out;
}
