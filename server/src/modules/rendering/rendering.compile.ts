/**
 * Templates compiled once, rendered many times: Liquid is applied to EACH STRING of the design,
 * then React renders the document (ARCHITECTURE.md "Known traps": Liquid over rendered HTML
 * breaks on React's escaped quotes, e.g. `default: "y"` becoming `default: &quot;y&quot;`).
 */
import { LRUCache } from 'lru-cache';
import { estimatedHeapBytes } from '../../heap-weight.ts';
import type { ValidationIssue } from '../../http/errors.ts';
import { AppError } from '../../http/errors.ts';
import { invalidTemplate, parseDesign } from './rendering.design.ts';
import {
  type DesignString,
  designStringsOf,
  htmlNestingDepth,
  htmlToText,
  MAX_HTML_NESTING,
  renderDesignHtml,
  withStrings,
} from './rendering.html.ts';
import {
  LIQUID_LIMITS,
  missingVariables,
  type ParsedLiquid,
  parseLiquid,
  renderLiquid,
  variablesOf,
} from './rendering.liquid.ts';
import type { EmailDesign } from './rendering.schema.ts';
import { buildSkeleton, fillSkeleton, type HtmlSkeleton } from './rendering.skeleton.ts';

/** One rendered email. `subject` and `text` are plain text (never HTML-escaped). */
export interface RenderedEmail {
  subject: string;
  html: string;
  text: string;
}

/** An email rendered without its text part: what the accept path queues (see `renderHtml`). */
export type RenderedHtml = Omit<RenderedEmail, 'text'>;

/** A template whose design and Liquid are parsed once; `render` only applies variables. */
export interface CompiledTemplate {
  /**
   * Renders with the caller's variables (missing ones render as '').
   * Rejects with AppError INVALID_TEMPLATE, `details.reason` LIMIT_EXCEEDED (a limit of
   * LIQUID_LIMITS was hit) or RENDER_ERROR, `details.issues[0].path` naming the string.
   */
  render(variables: Record<string, unknown>): Promise<RenderedEmail>;
  /**
   * `render` without the text part (`text` is `htmlToText(html)`, which the caller may derive
   * later: the accept path leaves it to the worker, issue #9). Rejects as `render` does.
   */
  renderHtml(variables: Record<string, unknown>): Promise<RenderedHtml>;
  /** Variables the template reads, as returned by `extractVariables`. */
  variables: string[];
  /**
   * The entries of `variables` that `values` leaves undefined, so they render as '' (preview's
   * `missingVariables`, issue #4 "Preview"): `user.name` is missing when `user` or `user.name`
   * is. Looked up the way rendering looks them up; a computed index (`items[i]`) is not followed.
   */
  missingVariables(values: Record<string, unknown>): string[];
}

interface ParsedTemplate {
  subject: ParsedLiquid;
  strings: DesignString[];
  parts: ParsedLiquid[];
}

/**
 * Bounds on what reaches marked, the Markdown parser of Text blocks with `markdown: true` (run by
 * @usewaypoint/block-text inside React's render, synchronously; review finding, session 12):
 * marked 12 takes time that grows with the square of some inputs: a run of N spaces after a
 * character (`'a' + ' '.repeat(40_000)` 0.75 s, 100,000 spaces ≈ 15 s, the whole process
 * stalled), and emphasis delimiters (`'*a '.repeat(6_666)`, 20,000 characters: 2.7 s; `*a **a `
 * 3.6 s). So runs of spaces longer than {@link MARKDOWN_SPACE_RUN} are cut to it (they render as
 * one space anyway, outside code), and the Markdown text of one email, after Liquid, is at most
 * {@link MARKDOWN_MAX_CHARS} characters of which at most {@link MARKDOWN_MAX_DELIMITERS} are `*`,
 * `_` or `~`: measured on this machine, the worst of those shapes then took 75 ms in marked
 * (`*a\n` × 1,000 padded to 20,000 characters), plain text under 1 ms.
 */
export const MARKDOWN_MAX_CHARS = 20_000;
/** The most `*`, `_` and `~` in the Markdown text of one email (see {@link MARKDOWN_MAX_CHARS}). */
export const MARKDOWN_MAX_DELIMITERS = 1_000;
/** The longest run of spaces handed to marked (see {@link MARKDOWN_MAX_CHARS}). */
export const MARKDOWN_SPACE_RUN = 64;
const LONG_SPACE_RUN = new RegExp(` {${MARKDOWN_SPACE_RUN + 1},}`, 'g');
const SPACES_PAST_RUN = ' '.repeat(MARKDOWN_SPACE_RUN + 1);
const SPACE_RUN = ' '.repeat(MARKDOWN_SPACE_RUN);
const EMPHASIS_DELIMITER = /[*_~]/g;

/**
 * `values` (the rendered strings of `strings`) with the Markdown ones bounded as
 * {@link MARKDOWN_MAX_CHARS} says: long runs of spaces cut; the same array when nothing changed.
 * @throws AppError INVALID_TEMPLATE, reason LIMIT_EXCEEDED, past MARKDOWN_MAX_CHARS or
 *   MARKDOWN_MAX_DELIMITERS.
 */
function boundMarkdown(strings: readonly DesignString[], values: string[]): string[] {
  let total = 0;
  let delimiters = 0;
  let bounded = values;
  strings.forEach((string, index) => {
    if (string.mode !== 'markdown') return;
    let value = values[index] ?? '';
    if (value.includes(SPACES_PAST_RUN)) {
      value = value.replace(LONG_SPACE_RUN, SPACE_RUN);
      if (bounded === values) bounded = [...values];
      bounded[index] = value;
    }
    total += value.length;
    if (total <= MARKDOWN_MAX_CHARS) delimiters += value.match(EMPHASIS_DELIMITER)?.length ?? 0;
  });
  if (total > MARKDOWN_MAX_CHARS) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      {
        path: '',
        message: `The Markdown text of the email exceeds ${MARKDOWN_MAX_CHARS} characters (${total})`,
      },
    ]);
  }
  if (delimiters > MARKDOWN_MAX_DELIMITERS) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      {
        path: '',
        message: `The Markdown text of the email has more than ${MARKDOWN_MAX_DELIMITERS} of the emphasis marks *, _ and ~ (${delimiters})`,
      },
    ]);
  }
  return bounded;
}

/**
 * Refuses Html block contents (rendered) nested deeper than {@link MAX_HTML_NESTING}.
 * @throws AppError INVALID_TEMPLATE, reason LIMIT_EXCEEDED, with the block's path.
 */
function boundHtmlNesting(strings: readonly DesignString[], values: readonly string[]): void {
  strings.forEach((string, index) => {
    if (string.mode !== 'html') return;
    if (htmlNestingDepth(values[index] ?? '', MAX_HTML_NESTING) > MAX_HTML_NESTING) {
      throw invalidTemplate('LIMIT_EXCEEDED', [
        { path: string.path, message: `The HTML nests elements more than ${MAX_HTML_NESTING} deep` },
      ]);
    }
  });
}

/**
 * An upper bound of the Liquid tags and outputs in `source`: its `{{` and `{%` openings, plus every
 * line of a `{% liquid %}` tag, each of which is a tag of its own (review finding, session 16:
 * liquidjs parses those lines in quadratic time, 140,000 lines of `echo a` took 21 s at save).
 */
function liquidTagCount(source: string): number {
  let count = 0;
  for (let i = source.indexOf('{'); i !== -1; i = source.indexOf('{', i + 1)) {
    const next = source.charCodeAt(i + 1);
    if (next !== 0x7b && next !== 0x25) continue; // '{' or '%'
    count += 1;
    if (next === 0x25 && LIQUID_TAG_START.test(source.slice(i, i + 64))) {
      const end = source.indexOf('%}', i + 2);
      const stop = end === -1 ? source.length : end;
      for (let at = source.indexOf('\n', i); at !== -1 && at < stop; at = source.indexOf('\n', at + 1))
        count += 1;
      i = stop;
    }
  }
  return count;
}

/** The start of a `{% liquid %}` tag (whitespace control allowed). */
const LIQUID_TAG_START = /^\{%-?\s*liquid\s/;

/** Parses the subject and every string of the design, reporting every bad string at once. */
function parseTemplate(subject: string, design: EmailDesign): ParsedTemplate {
  const strings = designStringsOf(design);
  const sourceChars = strings.reduce((sum, string) => sum + string.source.length, subject.length);
  if (sourceChars > LIQUID_LIMITS.sourceChars) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      { path: '', message: `Template text exceeds ${LIQUID_LIMITS.sourceChars} characters (${sourceChars})` },
    ]);
  }
  const tags = [subject, ...strings.map((string) => string.source)].reduce(
    (sum, source) => sum + liquidTagCount(source),
    0,
  );
  if (tags > LIQUID_LIMITS.tags) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      {
        path: '',
        message: `Template holds more than ${LIQUID_LIMITS.tags} Liquid tags and outputs (${tags})`,
      },
    ]);
  }
  const issues: ValidationIssue[] = [];
  let limitExceeded = false;
  const parse = (path: string, source: string, mode: ParsedLiquid['mode']): ParsedLiquid => {
    try {
      return parseLiquid(path, source, mode);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      limitExceeded ||= error.details.reason === 'LIMIT_EXCEEDED';
      issues.push(...(error.details.issues as ValidationIssue[]));
      return { path, mode, source, templates: null };
    }
  };
  const parsedSubject = parse('subject', subject, 'plain');
  const parts = strings.map((string) => parse(string.path, string.source, string.mode));
  if (issues.length > 0) throw invalidTemplate(limitExceeded ? 'LIMIT_EXCEEDED' : 'SYNTAX_ERROR', issues);
  // React's first render (the skeleton) takes the sources as they are: they must already be
  // within the Markdown bounds (a saved template over them is refused).
  const sources = strings.map((string) => string.source);
  if (boundMarkdown(strings, sources) !== sources) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      {
        path: '',
        message: `A Markdown text has a run of more than ${MARKDOWN_SPACE_RUN} spaces`,
      },
    ]);
  }
  return { subject: parsedSubject, strings, parts };
}

function requireSubject(subject: unknown): string {
  if (typeof subject !== 'string') {
    throw invalidTemplate('INVALID_DESIGN', [{ path: 'subject', message: 'Expected a string' }]);
  }
  return subject;
}

/**
 * A subject is one header line: line breaks (CR, LF, NEL, U+2028, U+2029, with the spaces around
 * them) become one space, and so does every other character a header may not hold (RFC 5322 §2.2:
 * C0 controls but tab, DEL, C1 controls), the set the send API refuses in a literal `subject`
 * (mailbox-address.ts isHeaderText). A variable could bring them in (review finding, session 15:
 * ESC and VT reached the stored subject and the hosted APIs).
 */
function toSubjectLine(subject: string): string {
  const folded = subject.replace(/\s*[\r\n\u0085\u2028\u2029]+\s*/g, ' ');
  let line = '';
  for (const character of folded) {
    const code = character.charCodeAt(0);
    line += (code < 0x20 && code !== 0x09) || (code >= 0x7f && code <= 0x9f) ? ' ' : character;
  }
  return line.trim();
}

/**
 * Liquid variables read by `subject` and by every string of the design that renders: sorted,
 * unique, full paths kept (`user.name`, `order.items[0].sku`), loop locals (`item`, `forloop`)
 * and names made by `assign`/`capture` excluded. Source: liquidjs `globalFullVariables`.
 * @throws AppError INVALID_TEMPLATE, `details.reason` SYNTAX_ERROR (or LIMIT_EXCEEDED), with
 *   `details.issues = [{path: 'subject' | 'block-1.data.props.text', message}]`.
 */
export function extractVariables(subject: string, design: EmailDesign): string[] {
  const parsed = parseTemplate(requireSubject(subject), design);
  return variablesOf([parsed.subject, ...parsed.parts]).map((variable) => variable.path);
}

/**
 * Validates the design (`parseDesign`) and parses the subject and each string of it once.
 * The returned template renders `{subject, html, text}`:
 * - strings are rendered by Liquid one by one, then the document by React, which escapes them;
 *   only Html blocks get Liquid-side HTML escaping (their contents are inserted raw). React's
 *   render is made once per compiled template and reused where it provably gives the same HTML
 *   (rendering.skeleton.ts);
 * - URL props (button/image url, linkHref, avatar imageUrl) rendered to a `javascript:`,
 *   `vbscript:` or `data:` URL are dropped ('#' for a button, '' otherwise);
 * - `text` is derived from the HTML (html-to-text; the last render's HTML and text are reused when
 *   the Liquid outputs are the same), `subject` is kept on one line.
 * @throws AppError INVALID_TEMPLATE: `details.reason` INVALID_DESIGN, SYNTAX_ERROR or
 *   LIMIT_EXCEEDED, `details.issues = [{path, message}]`.
 */
export function compileTemplate(input: { subject: string; designJson: unknown }): CompiledTemplate {
  const subject = requireSubject(input.subject);
  const design = parseDesign(input.designJson);
  const { subject: parsedSubject, strings, parts } = parseTemplate(subject, design);
  const variables = variablesOf([parsedSubject, ...parts]);
  const dynamicStrings = parts.flatMap((part, index) => (part.templates ? [index] : []));
  // React's render of the design, made on first use and reused by every render it reproduces.
  let skeleton: HtmlSkeleton | null | undefined;
  // The last render's Liquid outputs, HTML and text part: the HTML is a function of the outputs, so
  // a render whose outputs are the same (a template without variables, the same variables sent to
  // many recipients) reuses both and skips html-to-text, the costliest step of a render.
  let last: { key: string; html: string; text: string } | undefined;
  const renderParts = (values: Record<string, unknown>) => {
    const [renderedSubject = '', ...liquidOutputs] = renderLiquid([parsedSubject, ...parts], values);
    const renderedStrings = boundMarkdown(strings, liquidOutputs);
    const key = renderedStrings.join('\u0000');
    if (last?.key === key) return { subject: toSubjectLine(renderedSubject), html: last.html, key };
    boundHtmlNesting(strings, renderedStrings);
    if (skeleton === undefined) skeleton = buildSkeleton(design, strings, dynamicStrings);
    const html =
      (skeleton && fillSkeleton(skeleton, strings, renderedStrings)) ??
      renderDesignHtml(withStrings(design, strings, renderedStrings));
    return { subject: toSubjectLine(renderedSubject), html, key };
  };
  const renderHtml = async (values: Record<string, unknown>): Promise<RenderedHtml> => {
    const { subject: renderedSubject, html } = renderParts(values);
    return { subject: renderedSubject, html };
  };
  return {
    variables: variables.map((variable) => variable.path),
    missingVariables: (values) => missingVariables(variables, values),
    renderHtml,
    async render(values) {
      const { subject: renderedSubject, html, key } = renderParts(values);
      if (last?.key !== key || last.html !== html) last = { key, html, text: htmlToText(html) };
      return { subject: renderedSubject, html, text: last.text };
    },
  };
}

/** How many compiled templates `renderTemplate` keeps (least recently used go first). */
export const COMPILED_TEMPLATE_CACHE_SIZE = 200;
/**
 * Most estimated bytes of compiled templates kept: each weighs {@link COMPILED_WEIGHT_FACTOR} times
 * its design's estimatedHeapBytes (a design of 2 MB of JSON may take 40 MB parsed, so 200 entries
 * alone did not bound the process's memory).
 */
export const COMPILED_TEMPLATE_CACHE_MAX_BYTES = 64 * 1024 * 1024;
/**
 * A compiled template's weight per byte of its design's estimate: the design it keeps, its Liquid
 * parts and rendered pieces (measured on Node.js 24 for EmailBuilder's order-ecommerce sample: a
 * 50 KB design estimate, 26 KB of design and 146 KB of compiled state on the heap).
 */
const COMPILED_WEIGHT_FACTOR = 4;
const compiledTemplates = new LRUCache<string, CompiledTemplate>({
  max: COMPILED_TEMPLATE_CACHE_SIZE,
  maxSize: COMPILED_TEMPLATE_CACHE_MAX_BYTES,
});

/** The estimated bytes of the compiled templates kept now (for tests and diagnostics). */
export function compiledTemplateCacheBytes(): number {
  return compiledTemplates.calculatedSize;
}

/**
 * `compileTemplate(input)`, kept with `cacheKey` in an in-process LRU of
 * {@link COMPILED_TEMPLATE_CACHE_SIZE} entries: the key must name immutable content (a template
 * version id), as a later call with the same key reuses the first subject and design. Templates
 * that fail to compile are not cached.
 * @throws AppError INVALID_TEMPLATE as `compileTemplate` does.
 */
export function compileTemplateCached(input: {
  subject: string;
  designJson: unknown;
  cacheKey?: string;
}): CompiledTemplate {
  const { cacheKey } = input;
  if (cacheKey === undefined) return compileTemplate(input);
  let compiled = compiledTemplates.get(cacheKey);
  if (!compiled) {
    compiled = compileTemplate(input); // throws for a broken template, which is then not cached
    const weight = COMPILED_WEIGHT_FACTOR * estimatedHeapBytes(input.designJson) + 2 * input.subject.length;
    compiledTemplates.set(cacheKey, compiled, { size: Math.max(1, weight) });
  }
  return compiled;
}

/**
 * `compileTemplateCached(input).render(variables)` (without `cacheKey`, compiled for this call).
 * @throws (rejects with) AppError INVALID_TEMPLATE as `compileTemplate` and `render` do.
 */
export async function renderTemplate(
  input: { subject: string; designJson: unknown; cacheKey?: string },
  variables: Record<string, unknown>,
): Promise<RenderedEmail> {
  return compileTemplateCached(input).render(variables);
}

/**
 * `compileTemplateCached(input).renderHtml(variables)`: subject and HTML, no text part.
 * @throws (rejects with) AppError INVALID_TEMPLATE as `renderTemplate` does.
 */
export async function renderTemplateHtml(
  input: { subject: string; designJson: unknown; cacheKey?: string },
  variables: Record<string, unknown>,
): Promise<RenderedHtml> {
  return compileTemplateCached(input).renderHtml(variables);
}

/**
 * The design's HTML with Liquid left as written (for a template's `compiledHtml` field), unsafe
 * static URLs dropped. Text values are HTML-escaped by React, so `"` inside `{{ }}` appears as
 * `&quot;`: display or store this HTML, never run Liquid over it.
 * @throws AppError INVALID_TEMPLATE, reason RENDER_ERROR, if the renderer fails.
 */
export function compileDesignHtml(design: EmailDesign): string {
  const strings = designStringsOf(design);
  return renderDesignHtml(
    withStrings(
      design,
      strings,
      strings.map((string) => string.source),
    ),
  );
}

/**
 * A subject line given at send (issue #10 `subject` override) rendered with `variables` exactly as
 * a template's subject is (plain Liquid, line breaks folded to one space, under LIQUID_LIMITS).
 * @throws AppError INVALID_TEMPLATE (SYNTAX_ERROR, RENDER_ERROR or LIMIT_EXCEEDED), issue path `subject`.
 */
export function renderSubjectLine(source: string, variables: Record<string, unknown>): string {
  const [subject] = renderLiquid([parseLiquid('subject', source, 'plain')], variables);
  return toSubjectLine(subject ?? '');
}
