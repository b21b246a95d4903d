// Splits a markdown document into a ticket title and description. Pure; unit-tested.

export interface TicketText { title: string; description: string }

/**
 * The first heading (or, without one before other text, the first non-empty line) is the title;
 * everything else, trimmed, is the description. Front matter is skipped.
 */
export function ticketFromMarkdown(text: string): TicketText | undefined {
  let lines = text.replace(/\r\n?/g, '\n').split('\n');
  if (lines[0]?.trim() === '---') {
    const end = lines.findIndex((l, i) => i > 0 && l.trim() === '---');
    if (end > 0) lines = lines.slice(end + 1);
  }
  const first = lines.findIndex((l) => l.trim() !== '');
  if (first < 0) return undefined;
  let titleLine = lines[first].trim();
  let rest = lines.slice(first + 1);
  // A setext heading: "Title" underlined with === or ---.
  if (rest.length && /^(=+|-+)\s*$/.test(rest[0]) && !/^#/.test(titleLine)) rest = rest.slice(1);
  titleLine = titleLine.replace(/^#{1,6}\s+/, '').replace(/\s+#+\s*$/, '').trim();
  if (!titleLine) return undefined;
  return { title: titleLine.slice(0, 200), description: rest.join('\n').trim() };
}

/** Why the server would refuse this branch name at once (it also checks that the branch exists). */
export function branchProblem(v: string): string | undefined {
  const b = v.trim();
  if (!b) return undefined;
  if (b.startsWith('-')) return 'A branch name may not start with -';
  // eslint-disable-next-line no-control-regex
  if (/[\s\x00-\x1f\x7f]/.test(b)) return 'A branch name may not hold spaces or control characters';
  return undefined;
}
