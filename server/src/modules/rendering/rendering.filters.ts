/**
 * Array filters charged for the work they do, per element, against the render's memory budget
 * (issue #8: `{{ arr | sort_natural }}` on a 900,000-element array blocked the process 2.8 s;
 * `sort` and `where` on 400,000 elements 0.66 s each). A filter is one node of the template, and
 * liquidjs checks the render time limit only between nodes, so nothing stops a filter once it
 * runs: the budget must refuse it before it starts.
 *
 * liquidjs 10.30.1 charges most array filters `array.length` units, whatever one element costs.
 * Measured on the development machine (2 cores, Node 24, 100,000 elements), a unit of the other
 * charges (a range item, a character) costs 0.01-0.03 µs, while per element `sort` costs 1 µs,
 * `sort_natural` 2.3 µs, `where` 2 µs, `where_exp` 3.7 µs, `find` 1.9 µs, `group_by` 1.7 µs, `map`
 * and `sum` 0.25-0.3 µs. The extra charges below (on top of liquidjs's own) bring each filter to
 * about 0.1 µs a unit or less, so the whole budget ({@link LIQUID_LIMITS}.memory, 1,000,000 units)
 * is about 0.15 s of filter work at most, whatever the filters.
 */
import { type Context, type FilterImplOptions, filters, type Liquid, toValue } from 'liquidjs';

/** A filter implementation as liquidjs calls it (`this` is liquidjs's `FilterImpl`). */
type FilterHandler = Extract<FilterImplOptions, (...args: never[]) => unknown>;

/** Units charged per element comparison of a sort (`orderedCompare`). */
export const COMPARE_UNITS = 1;
/** `sort_natural` lower-cases both sides of every comparison (`caseInsensitiveCompare`). */
export const NATURAL_COMPARE_UNITS = 2;
/** Reading one property of an element (`map`, `sum`, `sort: "key"`). */
export const LOOKUP_UNITS = 3;
/** Evaluating a Liquid expression or property test for an element in a fresh scope (`where`, `find`, …). */
export const PREDICATE_UNITS = 25;
/**
 * Per element, per character of a filter's property path or expression argument: liquidjs reads
 * every segment of `map: "a.b.c"` and evaluates all of `where_exp: "x", "<expression>"` for each
 * element, so their cost grows with the argument too (review finding, session 15: `map` with a
 * path of 30,000 dots over 10,000 elements ran 10 s as 30,000 units; a 4,000-term `where_exp`
 * over 2,000 elements 12 s). Measured ≈ 0.03 µs per path segment and ≈ 0.1 µs per expression
 * character and element.
 */
export const ARGUMENT_CHARACTER_UNITS = 1;
/**
 * Per `%` conversion of a `date` format: `%a`, `%b`, `%Z`, … each build an Intl formatter (≈ 77 µs
 * measured: a format of 30,000 `%a` ran 2.3 s while liquidjs charged its 60,000 characters).
 */
export const DATE_CONVERSION_UNITS = 1_000;

const PREDICATE_FILTERS = [
  'where',
  'reject',
  'where_exp',
  'reject_exp',
  'group_by',
  'group_by_exp',
  'find',
  'find_exp',
  'find_index',
  'find_index_exp',
  'has',
  'has_exp',
] as const;

/**
 * How many elements a filter walks for `input`: an array's length, an object's key count
 * (`group_by` walks the entries of an object), 1 for anything else (liquidjs wraps it in an
 * array), or with `characters` a string's length (`sample` shuffles the characters of a string).
 */
function elementCount(input: unknown, characters = false): number {
  const value = toValue(input);
  if (Array.isArray(value)) return value.length;
  if (value !== null && typeof value === 'object') return Object.keys(value).length;
  if (characters && typeof value === 'string') return value.length;
  return 1;
}

/** Comparisons of a sort of `n` elements, worst case (n·⌈log2 n⌉). */
function comparisons(n: number): number {
  return n < 2 ? 0 : n * Math.ceil(Math.log2(n));
}

/** A built-in liquidjs filter as a plain function (liquidjs 10 registers them as functions). */
export function builtinFilter(name: string): FilterHandler {
  const filter = filters[name];
  if (typeof filter !== 'function') throw new Error(`liquidjs has no built-in filter "${name}"`);
  return filter;
}

/**
 * Re-registers the built-in filter `name` on `engine` so that it first charges
 * `units(input, ...args)` to the render's memory budget (liquidjs `memoryLimit`, which throws
 * "memory alloc limit exceeded" past the limit), then does what it did.
 */
function chargeBefore(engine: Liquid, name: string, units: (input: unknown, ...args: unknown[]) => number) {
  const builtin = builtinFilter(name);
  engine.registerFilter(name, function (this: { context: Context }, input: unknown, ...args: unknown[]) {
    this.context.memoryLimit.use(units(input, ...args));
    return builtin.apply(this as ThisParameterType<FilterHandler>, [input, ...args]);
  });
}

/**
 * Makes the array filters of `engine` charge per element what they cost (see the file comment):
 * sorts (`sort`, `sort_natural`, `sample`) n·⌈log2 n⌉ comparisons plus a lookup per element when
 * sorting by a property; `map` and `sum` a lookup per element; filters that evaluate a test or an
 * expression per element ({@link PREDICATE_FILTERS}) {@link PREDICATE_UNITS} per element; every
 * per-element charge plus {@link ARGUMENT_CHARACTER_UNITS} per character of the property path or
 * expression; all charged up front (a `find` that would stop early pays for the whole array). The
 * cheap copying filters (`reverse`, `concat`, `uniq`, `compact`, `join`, …) keep liquidjs's own
 * charge. `date` also pays {@link DATE_CONVERSION_UNITS} per `%` conversion of its format, and the
 * string filters of {@link CHARACTER_FILTERS} {@link STRING_CHARACTER_UNITS} per input character.
 */
export function chargeArrayFilters(engine: Liquid): void {
  const sortUnits = (perCompare: number) => (input: unknown, property?: unknown) => {
    const n = elementCount(input);
    return comparisons(n) * perCompare + (property ? n * (LOOKUP_UNITS + argumentUnits([property])) : 0);
  };
  chargeBefore(engine, 'sort', sortUnits(COMPARE_UNITS));
  chargeBefore(engine, 'sort_natural', sortUnits(NATURAL_COMPARE_UNITS));
  chargeBefore(engine, 'sample', (input) => comparisons(elementCount(input, true)) * COMPARE_UNITS);
  for (const name of ['map', 'sum']) {
    chargeBefore(
      engine,
      name,
      (input, ...args) => elementCount(input) * (LOOKUP_UNITS + argumentUnits(args)),
    );
  }
  for (const name of PREDICATE_FILTERS) {
    chargeBefore(
      engine,
      name,
      (input, ...args) => elementCount(input) * (PREDICATE_UNITS + argumentUnits(args)),
    );
  }
  chargeBefore(engine, 'date', (_input, format) => dateConversions(format) * DATE_CONVERSION_UNITS);
  for (const name of CHARACTER_FILTERS) {
    chargeBefore(engine, name, (input) => characterCount(input) * STRING_CHARACTER_UNITS);
  }
}

/**
 * String filters liquidjs charges nothing for, whose work grows with their input (measured per
 * character: `slugify: "latin"` 36 ns, `cgi_escape` 24, `slugify` 16, `url_encode` 11,
 * `uri_escape` 6.5, `url_decode` 3.5): a chain of 5,000 `url_decode` over a 250 KB variable blocked
 * a send for 2.9 s (review finding, session 16). Charged {@link STRING_CHARACTER_UNITS} per input
 * character, the whole budget is then at most about 40 ms of their work.
 */
const CHARACTER_FILTERS = ['url_decode', 'url_encode', 'cgi_escape', 'uri_escape', 'slugify'] as const;

/** Units per input character of a {@link CHARACTER_FILTERS} filter. */
export const STRING_CHARACTER_UNITS = 1;

/** The characters of a filter's input as the filter reads it (its string form). */
function characterCount(input: unknown): number {
  const value = toValue(input);
  return value === null || value === undefined ? 0 : String(value).length;
}

/**
 * {@link ARGUMENT_CHARACTER_UNITS} per character of a filter's string arguments (its property
 * path, item name, expression, expected value): what reading or evaluating them once per element
 * costs beyond the element's base charge.
 */
function argumentUnits(args: readonly unknown[]): number {
  let characters = 0;
  for (const arg of args) {
    const value = toValue(arg);
    if (typeof value === 'string') characters += value.length;
  }
  return characters * ARGUMENT_CHARACTER_UNITS;
}

/** The `%` conversions of a `date` format (a nil format is the engine's default, a few at most). */
function dateConversions(format: unknown): number {
  const value = toValue(format);
  if (typeof value !== 'string') return 0;
  let count = 0;
  for (let at = value.indexOf('%'); at !== -1; at = value.indexOf('%', at + 1)) count++;
  return count;
}
