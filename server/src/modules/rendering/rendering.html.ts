/**
 * From a validated design to HTML and text: which strings of a document carry Liquid, how
 * unsafe URLs are dropped, the one call into the EmailBuilder renderer, and the text part.
 */
import { createRequire } from 'node:module';
import type { TReaderDocument } from '@usewaypoint/email-builder';
import { invalidTemplate, ROOT_BLOCK_ID, reachableBlockIds } from './rendering.design.ts';
import type { LiquidMode } from './rendering.liquid.ts';
import type { BlockType, EmailBlock, EmailDesign } from './rendering.schema.ts';

/** A string prop of a block that may hold Liquid; `unsafeUrl` is set for URL props. */
interface StringProp {
  prop: string;
  mode: LiquidMode;
  /** What replaces a `javascript:`/`vbscript:`/`data:` URL: '#' keeps a button a link, '' drops the link/image. */
  unsafeUrl?: '#' | '';
}

const STRING_PROPS: Partial<Record<BlockType, StringProp[]>> = {
  Text: [{ prop: 'text', mode: 'plain' }],
  Heading: [{ prop: 'text', mode: 'plain' }],
  Button: [
    { prop: 'text', mode: 'plain' },
    { prop: 'url', mode: 'plain', unsafeUrl: '#' },
  ],
  Image: [
    { prop: 'url', mode: 'plain', unsafeUrl: '' },
    { prop: 'alt', mode: 'plain' },
    { prop: 'linkHref', mode: 'plain', unsafeUrl: '' },
  ],
  Avatar: [
    { prop: 'imageUrl', mode: 'plain', unsafeUrl: '' },
    { prop: 'alt', mode: 'plain' },
  ],
  Html: [{ prop: 'contents', mode: 'html' }],
};

/** One Liquid-bearing string of a design: where it is (`path`), how to escape it, its source. */
export interface DesignString extends StringProp {
  blockId: string;
  path: string;
  source: string;
}

function propsOf(block: EmailBlock): Record<string, unknown> {
  return (block.data as { props?: Record<string, unknown> | null }).props ?? {};
}

/**
 * Every non-empty string prop of the blocks reachable from the root, in render order.
 * Text blocks with `markdown: true` are in `markdown` mode, Html blocks in `html` mode.
 */
export function designStringsOf(design: EmailDesign): DesignString[] {
  const strings: DesignString[] = [];
  for (const blockId of reachableBlockIds(design)) {
    const block = design[blockId]!;
    const props = propsOf(block);
    for (const spec of STRING_PROPS[block.type] ?? []) {
      const source = props[spec.prop];
      if (typeof source !== 'string' || source === '') continue;
      const mode = block.type === 'Text' && props.markdown === true ? 'markdown' : spec.mode;
      strings.push({ ...spec, mode, blockId, path: `${blockId}.data.props.${spec.prop}`, source });
    }
  }
  return strings;
}

/**
 * True for a URL whose scheme is `javascript:`, `vbscript:` or `data:`, however written:
 * browsers ignore case, leading spaces/control characters and tabs/newlines inside the scheme
 * (WHATWG URL parsing), so those are removed before comparing.
 */
export function isUnsafeUrl(url: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we strip
  const compact = url.replace(/[\u0000-\u0020\u007f]+/g, '').toLowerCase();
  return /^(javascript|vbscript|data):/.test(compact);
}

/**
 * A copy of `design` with each string of `strings` replaced by `values[i]` (unsafe URLs
 * replaced as their prop says). Blocks without replaced strings are shared, not copied.
 */
export function withStrings(design: EmailDesign, strings: DesignString[], values: string[]): EmailDesign {
  const copy: EmailDesign = { ...design };
  strings.forEach((string, index) => {
    let value = values[index] ?? '';
    if (string.unsafeUrl !== undefined && isUnsafeUrl(value)) value = string.unsafeUrl;
    if (value === string.source) return;
    const block = copy[string.blockId]!;
    const data = block.data as Record<string, unknown>;
    copy[string.blockId] = {
      ...block,
      data: { ...data, props: { ...propsOf(block), [string.prop]: value } },
    } as EmailBlock;
  });
  return copy;
}

/**
 * The email's HTML (`<!DOCTYPE html><html><body>…`) from `renderToStaticMarkup` of
 * @usewaypoint/email-builder (React escapes every text and attribute value).
 * @throws AppError INVALID_TEMPLATE, reason RENDER_ERROR, if the renderer throws.
 */
export function renderDesignHtml(design: EmailDesign): string {
  const { renderToStaticMarkup } = renderer();
  try {
    // Our schema is the renderer's, minus zod-3 tuple typing of `columns`: same data at run time.
    return renderToStaticMarkup(design as unknown as TReaderDocument, { rootBlockId: ROOT_BLOCK_ID });
  } catch (error) {
    throw invalidTemplate('RENDER_ERROR', [
      { path: '', message: error instanceof Error ? error.message : String(error) },
    ]);
  }
}

/*
 * The renderer (EmailBuilder + React, ~6 MB of heap) and html-to-text (~2 MB) are loaded on the
 * first render, not at start: an idle server never renders (issue #9, idle memory). `require`
 * keeps rendering synchronous; Node loads both packages' CommonJS builds, a one-time cost of tens
 * of milliseconds on the first render.
 */
const require = createRequire(import.meta.url);
let loadedRenderer: typeof import('@usewaypoint/email-builder') | undefined;
let htmlToTextConverter: ((html: string) => string) | undefined;

let htmlParserClass: typeof import('htmlparser2').Parser | undefined;

function htmlParser(): typeof import('htmlparser2').Parser {
  htmlParserClass ??= (require('htmlparser2') as typeof import('htmlparser2')).Parser;
  return htmlParserClass;
}

function renderer(): typeof import('@usewaypoint/email-builder') {
  loadedRenderer ??= require('@usewaypoint/email-builder') as typeof import('@usewaypoint/email-builder');
  return loadedRenderer;
}

function textConverter(): (html: string) => string {
  htmlToTextConverter ??= createTextConverter();
  return htmlToTextConverter;
}

/** Width of the text part's lines (characters); html-to-text keeps a longer word whole. */
export const TEXT_LINE_WIDTH = 78;

/** Most characters of a text part: past it the template is refused (LIMIT_EXCEEDED). */
export const TEXT_PART_MAX_CHARS = 2_000_000;

/**
 * html-to-text, configured so its output stays about the size of the HTML (review finding, session
 * 16): `blockquote` as a plain block (each level prefixed every inner line again, `> `, so 250
 * nested quotes made a 100 MB text part of 11 KB of HTML in 25 s) and `hr` as a short rule.
 */
function createTextConverter(): (html: string) => string {
  const { compile } = require('html-to-text') as typeof import('html-to-text');
  return compile({
    wordwrap: TEXT_LINE_WIDTH,
    selectors: [
      { selector: 'img', format: 'skip' },
      { selector: 'a', options: { hideLinkIfSameAsText: true, linkBrackets: ['[', ']'] } },
      { selector: 'h1', options: { uppercase: false } },
      { selector: 'h2', options: { uppercase: false } },
      { selector: 'h3', options: { uppercase: false } },
      { selector: 'blockquote', format: 'block' },
      { selector: 'hr', options: { length: 20 } },
    ],
  });
}

/**
 * The work html-to-text's line wrapping would do on long words, in characters: it joins adjacent
 * text (text nodes, inline elements, the `[url]` of links) into one word, and each piece added to a
 * word longer than a line re-splits the whole word, so the work is the sum of those words' lengths
 * at each piece, quadratic in the pieces (review finding, session 16: `<td>a` 198,000 times took
 * 11.7 s, 43,000 empty links 6.3 s). Counted by one htmlparser2 pass, stopping past `budget`;
 * whitespace in a text node and the elements html-to-text breaks lines at end the word (table cells
 * do not: html-to-text joins them).
 */
export function longWordWork(html: string, budget: number): number {
  if (!html.includes('<')) return 0;
  const Parser = htmlParser();
  let word = 0;
  let work = 0;
  const add = (text: string) => {
    const space = text.search(/\s\S*$/);
    word = space === -1 ? word + text.length : text.length - space - 1;
    if (word > TEXT_LINE_WIDTH) work += word;
    if (work > budget) parser.pause();
  };
  const parser = new Parser(
    {
      ontext: add,
      onopentag(name, attributes) {
        if (WORD_BREAKING_ELEMENTS.has(name)) word = 0;
        else if (name === 'a' && attributes.href) add(`[${attributes.href}]`);
      },
      onclosetag(name) {
        if (WORD_BREAKING_ELEMENTS.has(name)) word = 0;
      },
    },
    { decodeEntities: false },
  );
  parser.end(html);
  return work;
}

/**
 * False when `html` cannot make {@link longWordWork} pass its limit, without parsing it: a word
 * grows by one piece per tag at most (a text node ends at a tag; a link adds its `[url]`), and is
 * at most twice the HTML long, so the work is at most (tags + 1) × 2 × length. Ordinary emails
 * (the EmailBuilder samples: at most 2.5 million) skip the parse (50-250 µs of the worker per email).
 */
function mayWrapLongWords(html: string): boolean {
  let tags = 0;
  for (let at = html.indexOf('<'); at !== -1; at = html.indexOf('<', at + 1)) tags++;
  return (tags + 1) * 2 * html.length > TEXT_WRAP_WORK_LIMIT;
}

/** Elements html-to-text starts a new line at (a word never runs across them). */
const WORD_BREAKING_ELEMENTS = new Set([
  'br',
  'p',
  'div',
  'li',
  'ul',
  'ol',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'blockquote',
  'pre',
  'hr',
  'section',
  'article',
  'header',
  'footer',
  'main',
  'nav',
  'aside',
  'figure',
  'dl',
  'dt',
  'dd',
]);

/** The most line-wrapping work ({@link longWordWork}) a text part may take: a few tens of ms. */
export const TEXT_WRAP_WORK_LIMIT = 20_000_000;

/**
 * The deepest nesting of elements allowed in the HTML an Html block renders to (after Liquid,
 * whose loops can repeat an opening tag from a short source). html-to-text formats the tree by
 * recursion: `<b>` nested 20,000 deep in an Html block overflowed the stack (review finding,
 * session 12), and how deep the stack goes depends on the caller, so the bound is explicit and far
 * below it (an overflow was seen from ≈ 2,000 levels); real emails nest tables a few dozen deep.
 */
export const MAX_HTML_NESTING = 256;

/**
 * The deepest element nesting of `html` (htmlparser2, the parser html-to-text uses: void and
 * self-closing elements and implied ends as it sees them), stopping once past `limit`.
 */
export function htmlNestingDepth(html: string, limit: number): number {
  if (!html.includes('<')) return 0;
  const Parser = htmlParser();
  let depth = 0;
  let deepest = 0;
  const parser = new Parser(
    {
      onopentag() {
        depth++;
        if (depth > deepest) deepest = depth;
        if (deepest > limit) parser.pause();
      },
      onclosetag() {
        depth--;
      },
    },
    { decodeEntities: false },
  );
  parser.end(html);
  return deepest;
}

/**
 * The text/plain part: html-to-text, lines wrapped at 78, links as `text [url]`, images skipped.
 * @throws AppError INVALID_TEMPLATE, reason LIMIT_EXCEEDED, for HTML nested too deeply for the
 *   converter (its formatting recurses per element: `<b>` 20,000 times deep in an Html block
 *   overflowed the stack, a 500 at preview, at send and on the log's rendered view; review finding,
 *   session 12), so such a template is refused when saved.
 */
export function htmlToText(html: string): string {
  if (mayWrapLongWords(html) && longWordWork(html, TEXT_WRAP_WORK_LIMIT) > TEXT_WRAP_WORK_LIMIT) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      { path: '', message: 'The HTML joins too much text without spaces to be converted to text' },
    ]);
  }
  try {
    const text = textConverter()(html).trim();
    if (text.length > TEXT_PART_MAX_CHARS) {
      throw invalidTemplate('LIMIT_EXCEEDED', [
        { path: '', message: `The text part would hold more than ${TEXT_PART_MAX_CHARS} characters` },
      ]);
    }
    return text;
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw invalidTemplate('LIMIT_EXCEEDED', [
      { path: '', message: 'The HTML nests elements too deeply to be converted to text' },
    ]);
  }
}
