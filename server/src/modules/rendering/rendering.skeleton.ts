/**
 * The React render of a design done once per compiled template (issue #9 "cheap hot path"): the
 * document is rendered with a unique token in place of each string that carries Liquid, and split
 * at those tokens. A render then only joins the pieces with the Liquid output of each string,
 * escaped the way React escapes it (`html` strings inserted raw, as the Html block does).
 *
 * This is NOT Liquid over rendered HTML (ARCHITECTURE.md "Known traps"): Liquid still runs on
 * each string of the design; only React's part is reused. A skeleton is only used when it is
 * proven equal to React on this design: every token appears exactly once, and a probe render with
 * values full of characters React escapes (`&<>"'`, line breaks, markup for `html` strings) is
 * byte-identical to the pieces joined with the escaped probe values. Otherwise (and for markdown
 * strings, which marked renders) every render goes through React.
 */
import { randomBytes } from 'node:crypto';
import { type DesignString, isUnsafeUrl, renderDesignHtml, withStrings } from './rendering.html.ts';
import type { EmailDesign } from './rendering.schema.ts';

/** A design's HTML split at its Liquid strings: `pieces[0] + value(slots[0]) + pieces[1] + …`. */
export interface HtmlSkeleton {
  pieces: string[];
  /** For each gap between two pieces, the index (into the design's strings) of the string there. */
  slots: number[];
}

const ESCAPED: Record<string, string> = {
  '"': '&quot;',
  '&': '&amp;',
  "'": '&#x27;',
  '<': '&lt;',
  '>': '&gt;',
};

/**
 * Text or attribute value escaped as React 18's server renderer escapes it (`escapeTextForBrowser`:
 * `"` `&` `'` `<` `>`). The probe render in {@link buildSkeleton} checks it against React itself.
 */
export function escapeLikeReact(value: string): string {
  return /["&'<>]/.test(value) ? value.replace(/["&'<>]/g, (c) => ESCAPED[c]!) : value;
}

/** What the skeleton puts in slot `index` for the rendered `value` of `string`. */
function slotValue(string: DesignString, value: string): string {
  return string.mode === 'html' ? value : escapeLikeReact(value);
}

/**
 * Joins a skeleton with the rendered strings, or returns null when a value needs React's own
 * rendering: an empty value (blocks render differently without a link or image) or an unsafe URL
 * (replaced by `withStrings`).
 */
export function fillSkeleton(
  skeleton: HtmlSkeleton,
  strings: DesignString[],
  values: readonly string[],
): string | null {
  let html = skeleton.pieces[0]!;
  for (let gap = 0; gap < skeleton.slots.length; gap++) {
    const index = skeleton.slots[gap]!;
    const string = strings[index]!;
    const value = values[index] ?? '';
    if (value === '' || (string.unsafeUrl !== undefined && isUnsafeUrl(value))) return null;
    html += slotValue(string, value) + skeleton.pieces[gap + 1]!;
  }
  return html;
}

/**
 * Renders `design` once with a token for each string of `dynamic` (indexes into `strings`), and
 * returns the skeleton if it reproduces React exactly (see the file comment), else null.
 * Markdown strings are never slotted (null). `renderDesignHtml` errors propagate.
 */
export function buildSkeleton(
  design: EmailDesign,
  strings: DesignString[],
  dynamic: readonly number[],
): HtmlSkeleton | null {
  if (dynamic.some((index) => strings[index]!.mode === 'markdown')) return null;
  const nonce = randomBytes(6).toString('hex');
  const token = (index: number) => `pwslot${nonce}n${index}e`;
  const values = strings.map((string) => string.source);
  for (const index of dynamic) values[index] = token(index);
  const html = renderDesignHtml(withStrings(design, strings, values));
  const found = dynamic.map((index) => ({ index, at: html.indexOf(token(index)) }));
  if (found.some(({ index, at }) => at < 0 || html.indexOf(token(index), at + 1) >= 0)) return null;
  found.sort((a, b) => a.at - b.at);
  const pieces: string[] = [];
  let from = 0;
  for (const { index, at } of found) {
    pieces.push(html.slice(from, at));
    from = at + token(index).length;
  }
  pieces.push(html.slice(from));
  const skeleton: HtmlSkeleton = { pieces, slots: found.map(({ index }) => index) };
  // The probe: what React makes of values it must escape, against the skeleton joined with them.
  const probe = strings.map((string) => string.source);
  for (const index of dynamic) {
    probe[index] =
      strings[index]!.mode === 'html'
        ? `<b class="p">&amp; ${index}</b>\n'x'`
        : `a&b <c> "d" 'e'\n ${index}  f`;
  }
  const expected = renderDesignHtml(withStrings(design, strings, probe));
  return fillSkeleton(skeleton, strings, probe) === expected ? skeleton : null;
}
