/**
 * Liquid (liquidjs) for template strings: one locked-down engine per output context,
 * parse once, render many times under one shared budget per email.
 *
 * Limits follow ARCHITECTURE.md "Known traps": parseLimit, renderLimit AND memoryLimit are all
 * set (renderLimit is only checked between nodes, so a `(1..100000000)` range is stopped by
 * memoryLimit), plus a cap on the characters Liquid writes, so a loop printing 10 MB stops as
 * soon as it passes the cap instead of when the clock runs out. A filter is one node, so array
 * filters are charged to memoryLimit per element before they run (rendering.filters.ts), and
 * `{% capture %}` charges what it captures (rendering.capture.ts).
 */
import {
  analyzeSync,
  Context,
  type Emitter,
  Liquid,
  LiquidError,
  type Template,
  Token,
  toValueSync,
  type Variable,
} from 'liquidjs';
import type { ValidationIssue } from '../../http/errors.ts';
import { ChargedCaptureTag } from './rendering.capture.ts';
import { invalidTemplate } from './rendering.design.ts';
import { builtinFilter, chargeArrayFilters } from './rendering.filters.ts';

/** DoS limits of one template; the same figures apply to every render of it. */
export const LIQUID_LIMITS = {
  /** Characters of Liquid source in one template (subject and every string together). */
  sourceChars: 1_000_000,
  /**
   * Distinct variables one template may read, and the characters of their paths together: the
   * list is stored on the template and returned by every list page; nested computed indexes
   * (`a[a[a[…]]]`) made 1.5 MB of paths from 3 KB of source (review finding, session 16).
   */
  variables: 2_000,
  variableChars: 100_000,
  /**
   * `{{` and `{%` openings in one template: parsing and analysing 32,000 outputs took about half a
   * second of one event loop (review finding, session 16); real templates hold dozens.
   */
  tags: 10_000,
  /**
   * CPU time of the Liquid part of one render, ms, all strings together: time the rendering
   * thread spent working (`process.threadCpuUsage`), so a render stalled by a loaded machine (the
   * process descheduled, other processes on the cores) is not refused for time it did not use.
   */
  renderMs: 50,
  /** Wall time of the Liquid part of one render, ms: the backstop whatever the CPU clock says. */
  renderWallMs: 1_000,
  /**
   * liquidjs allocation units per render: range items, characters built by filters, and the
   * per-element work of array filters (rendering.filters.ts: sorts n·log2 n, `where` 25 per item).
   */
  memory: 1_000_000,
  /** Characters written by Liquid tags and outputs per render, all strings together. */
  outputChars: 1_000_000,
} as const;

/**
 * Where a string ends up, which decides how Liquid escapes output values:
 * `plain` not at all (React escapes it later, or it is the subject/text part), `html` HTML-escaped
 * (Html blocks are inserted raw), `markdown` HTML-escaped and markdown-link syntax neutralised
 * (Text blocks with `markdown: true` go through marked, which passes raw HTML through).
 */
export type LiquidMode = 'plain' | 'html' | 'markdown';

/** One string of a template, parsed; `templates` is null for a string without Liquid. */
export interface ParsedLiquid {
  path: string;
  mode: LiquidMode;
  source: string;
  templates: Template[] | null;
}

class OutputLimitError extends Error {}

/** CPU time this thread has spent, ms. */
function threadCpuMs(): number {
  const { user, system } = process.threadCpuUsage();
  return (user + system) / 1000;
}

/**
 * The render clock of one email, in place of liquidjs's wall-time `renderLimit` (a `Limiter`
 * whose `check(now)` liquidjs calls with `performance.now()` before each node it renders).
 * Refuses the render once it used {@link LIQUID_LIMITS}.renderMs of CPU time or
 * {@link LIQUID_LIMITS}.renderWallMs of wall time. The CPU clock is read only when the wall clock
 * says the CPU budget could be spent (never more than once per node, never in an ordinary render).
 * The message starts as liquidjs's own ("template render limit exceeded"), which `isLimitError`
 * recognises.
 */
class RenderClock {
  private readonly startCpu = threadCpuMs();
  private readonly wallDeadline: number;
  /** Before this wall time the CPU budget cannot be spent yet: no need to read the CPU clock. */
  private nextCpuCheck: number;

  constructor(now = performance.now()) {
    this.wallDeadline = now + LIQUID_LIMITS.renderWallMs;
    this.nextCpuCheck = now + LIQUID_LIMITS.renderMs;
  }

  check(now: number): void {
    if (now <= this.nextCpuCheck) return;
    if (now > this.wallDeadline) {
      throw new Error(`template render limit exceeded: ${LIQUID_LIMITS.renderWallMs} ms of wall time`);
    }
    const used = threadCpuMs() - this.startCpu;
    if (used > LIQUID_LIMITS.renderMs) {
      throw new Error(`template render limit exceeded: ${LIQUID_LIMITS.renderMs} ms of CPU time`);
    }
    this.nextCpuCheck = now + (LIQUID_LIMITS.renderMs - used);
  }

  /** Part of liquidjs's Limiter interface; the render clock is only ever `check`ed. */
  use(): void {}
}

const escapeFilter = builtinFilter('escape');
const appendFilter = builtinFilter('append');

/**
 * Output escaping of `markdown` strings: liquidjs's own `escape` filter (which stringifies the
 * value as Liquid prints it and charges its length), then a backslash before what would start a
 * link, an image or code. HTML entities contain none of these characters, so the order is free.
 */
function escapeMarkdown(this: ThisParameterType<typeof escapeFilter>, value: unknown): string {
  return (escapeFilter.call(this, value) as string).replace(/[\\`*[\]]/g, '\\$&');
}

function createEngine(outputEscape?: 'escape' | typeof escapeMarkdown): Liquid {
  const engine = new Liquid({
    templates: {}, // an empty in-memory file system: partials never come from the disk
    strictVariables: false,
    strictFilters: true,
    ownPropertyOnly: true,
    outputEscape,
    parseLimit: LIQUID_LIMITS.sourceChars,
    // Renders pass their own RenderClock (CPU time); this wall bound applies to any other use.
    renderLimit: LIQUID_LIMITS.renderWallMs,
    memoryLimit: LIQUID_LIMITS.memory,
    // Without it, liquidjs asks Intl.DateTimeFormat for the host's default locale when the
    // engine is made, which loads ICU's data at start (≈ 5 MB of the node binary's pages and
    // ICU's malloc'd tables, issue #9 idle memory); a fixed locale also renders the same text
    // on every host. ICU is loaded at the first date filter that needs it.
    locale: 'en-US',
  });
  chargeArrayFilters(engine);
  // liquidjs's own capture renders into an emitter of its own that nothing charges.
  engine.registerTag('capture', ChargedCaptureTag);
  for (const tag of ['include', 'render', 'layout']) {
    engine.registerTag(tag, {
      parse() {
        throw new Error(`The "${tag}" tag is not available in templates`);
      },
      render() {},
    });
  }
  return engine;
}

const ENGINES: Record<LiquidMode, Liquid> = {
  plain: createEngine(),
  html: createEngine('escape'),
  markdown: createEngine(escapeMarkdown),
};

function isLimitError(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = (e as { originalError?: unknown }).originalError) {
    if (e instanceof OutputLimitError || e instanceof RangeError) return true;
    if (/(parse length|memory alloc|template render) limit exceeded/.test(e.message)) return true;
    if (!(e instanceof LiquidError)) break;
  }
  return false;
}

function issueOf(error: unknown, path: string): ValidationIssue {
  return { path, message: error instanceof Error ? error.message : String(error) };
}

/**
 * Parses one string. Strings without `{{` or `{%` are kept as they are (no Liquid to run).
 * @throws AppError INVALID_TEMPLATE, `reason` SYNTAX_ERROR or LIMIT_EXCEEDED, `issues[0].path = path`.
 */
export function parseLiquid(path: string, source: string, mode: LiquidMode): ParsedLiquid {
  if (!source.includes('{{') && !source.includes('{%')) return { path, mode, source, templates: null };
  try {
    return { path, mode, source, templates: ENGINES[mode].parse(source) };
  } catch (error) {
    throw invalidTemplate(isLimitError(error) ? 'LIMIT_EXCEEDED' : 'SYNTAX_ERROR', [issueOf(error, path)]);
  }
}

/**
 * A variable a template reads from the caller: `path` as liquidjs prints it (`user.name`,
 * `order.items[0].sku`, `a['b c']`, `items[i].sku`) and its `segments` (`Variable.toArray()`:
 * a property name, an index, or a nested array for a computed index: `items[i]` → `['items', ['i']]`).
 */
export interface TemplateVariable {
  path: string;
  segments: ReturnType<Variable['toArray']>;
}

/**
 * Variables the strings read from the caller, sorted by path, unique. One liquidjs `analyzeSync`
 * per string: its `globals` are what `globalFullVariablesSync` (the paths) and
 * `globalVariableSegmentsSync` (the segments) both map from, taken here from the same `Variable`
 * so a path and its segments cannot disagree. Loop locals and assigned names are not globals.
 */
export function variablesOf(parts: ParsedLiquid[]): TemplateVariable[] {
  const byPath = new Map<string, TemplateVariable>();
  let characters = 0;
  for (const part of parts) {
    if (!part.templates) continue;
    try {
      const { globals } = analyzeSync(part.templates, { partials: false });
      for (const variable of Object.values(globals).flat()) {
        const path = String(variable);
        if (byPath.has(path)) continue;
        characters += path.length;
        if (byPath.size >= LIQUID_LIMITS.variables || characters > LIQUID_LIMITS.variableChars) {
          throw invalidTemplate('LIMIT_EXCEEDED', [
            {
              path: part.path,
              message: `a template may read at most ${LIQUID_LIMITS.variables} variables of ${LIQUID_LIMITS.variableChars} characters together`,
            },
          ]);
        }
        byPath.set(path, { path, segments: variable.toArray() });
      }
    } catch (error) {
      // Deeply nested expressions overflow liquidjs's recursive analysis (a 500 before).
      if (error instanceof RangeError) throw invalidTemplate('LIMIT_EXCEEDED', [issueOf(error, part.path)]);
      throw error;
    } finally {
      lineStartsOf = undefined; // the table holds the whole input string
    }
  }
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * liquidjs's `Token.getPosition()` counts rows and columns by scanning its input from the start, and
 * `analyzeSync` asks it for every variable: a string of n variables cost O(n × length) (16,000
 * variables in a 127 KB design: 3.4 s of one save with the event loop blocked; review finding,
 * session 16). The same answer, from a table of line starts kept for the last input scanned
 * (binary search: O(log lines) per token once the table is built).
 */
let lineStartsOf: { input: string; starts: number[] } | undefined;
Token.prototype.getPosition = function getPosition(this: Token): [number, number] {
  if (lineStartsOf?.input !== this.input) {
    const starts = [0];
    for (let i = this.input.indexOf('\n'); i !== -1; i = this.input.indexOf('\n', i + 1)) starts.push(i + 1);
    lineStartsOf = { input: this.input, starts };
  }
  const { starts } = lineStartsOf;
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (starts[middle]! <= this.begin) low = middle;
    else high = middle - 1;
  }
  return [low + 1, this.begin - starts[low]! + 1];
};

/**
 * The paths of `used` that `values` leaves undefined (the value, or a step before it, is
 * undefined or null), looked up by liquidjs itself (`Context.getSync`, the lookup rendering does:
 * own properties only, `size`/`first`/`last`, negative array indexes). A path with a computed
 * index (`items[i].sku`) is looked up to before that index only, as its value depends on the
 * template's own state.
 */
export function missingVariables(
  used: readonly TemplateVariable[],
  values: Record<string, unknown>,
): string[] {
  const context = new Context(values, ENGINES.plain.options, { sync: true });
  return used
    .filter(({ segments }) => {
      const computedAt = segments.findIndex((segment) => Array.isArray(segment));
      const known = (computedAt === -1 ? segments : segments.slice(0, computedAt)) as (string | number)[];
      const value = context.getSync(known);
      if (value !== null) return value === undefined;
      // liquidjs reads any property of null as null: null here is either the value itself
      // (present) or a step before it that was null (the path cannot be read: missing).
      return known.length > 1 && context.getSync(known.slice(0, -1)) == null;
    })
    .map((variable) => variable.path);
}

/**
 * Buffers one string's output while counting every string's output against one cap. Values of
 * `{{ }}` arrive unconverted in the `plain` mode (no output filter): they are printed as Liquid
 * prints them by liquidjs's `append` filter with an empty suffix (`stringify(value) + ''`;
 * liquidjs does not export `stringify` itself), which also charges their length to the budget.
 */
class CappedEmitter implements Emitter {
  buffer = '';
  private written = 0;
  private readonly budget: Context;

  constructor(budget: Context) {
    this.budget = budget;
  }

  write(html: unknown): void {
    const text = typeof html === 'string' ? html : (appendFilter.call(this.filterThis(), html, '') as string);
    this.written += text.length;
    if (this.written > LIQUID_LIMITS.outputChars) {
      throw new OutputLimitError(`Liquid output exceeds ${LIQUID_LIMITS.outputChars} characters`);
    }
    this.buffer += text;
  }

  /** The `this` of a filter call: `append` reads only `context` (for its memory budget). */
  private filterThis(): ThisParameterType<typeof appendFilter> {
    return { context: this.budget } as ThisParameterType<typeof appendFilter>;
  }
}

/**
 * Renders parsed strings with the caller's variables, synchronously (so the time budget is
 * not spent by other work on the event loop), under ONE budget of {@link LIQUID_LIMITS} for
 * all of them (its time limit counts CPU time: see RenderClock). Each string gets its own scope (an `assign` in one block does not leak into the
 * next) over a shallow copy of `variables` (`increment` cannot change the caller's object).
 * Missing variables render as ''. Returns the outputs in the order of `parts`.
 * @throws AppError INVALID_TEMPLATE, `reason` LIMIT_EXCEEDED or RENDER_ERROR, `issues[0].path`
 *   naming the string.
 */
export function renderLiquid(parts: ParsedLiquid[], variables: Record<string, unknown>): string[] {
  const budget = new Context({}, ENGINES.plain.options, { sync: true });
  const renderLimit = new RenderClock() as unknown as Context['renderLimit'];
  const emitter = new CappedEmitter(budget);
  return parts.map((part) => {
    if (!part.templates) return part.source;
    const engine = ENGINES[part.mode];
    const context = new Context(
      { ...variables },
      engine.options,
      { sync: true },
      { memoryLimit: budget.memoryLimit, renderLimit, liquid: engine },
    );
    emitter.buffer = '';
    try {
      toValueSync(engine.renderer.renderTemplates(part.templates, context, emitter));
    } catch (error) {
      throw invalidTemplate(isLimitError(error) ? 'LIMIT_EXCEEDED' : 'RENDER_ERROR', [
        issueOf(error, part.path),
      ]);
    }
    return emitter.buffer;
  });
}
