import { AppError, validationError } from './errors.ts';
import { jsonDepth, MAX_JSON_DEPTH } from './json-depth.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route's body is not refused whole for an ill-formed string (see
     * {@link illFormedStringError}): a send batch checks each item with the send body's schema,
     * which refuses such strings itself (send-fields.schema.ts `refuseUnstorableStrings`), so one
     * bad item fails alone and the others are accepted.
     */
    stringsCheckedPerItem?: boolean;
  }
}

/**
 * A `\uD800`-`\uDFFF` escape. A body is decoded from UTF-8 (which cannot encode a surrogate), so
 * an escape is the only way a parsed JSON string or key can hold an unpaired one; a body without
 * such an escape, nearly every body, is not walked at all.
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * The first node of `value` for which `find` answers: its path (keys from the root) and the
 * answer; undefined when there is none. Depth first, in key order. `value` is parsed JSON no
 * deeper than {@link MAX_JSON_DEPTH} (checked before parsing), so the recursion is bounded.
 */
function findInJson<T>(
  value: unknown,
  find: (node: unknown) => T | undefined,
  path: string[] = [],
): { path: string[]; found: T } | undefined {
  const found = find(value);
  if (found !== undefined) return { path: [...path], found };
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, item] of Object.entries(value)) {
    path.push(key);
    const hit = findInJson(item, find, path);
    path.pop();
    if (hit) return hit;
  }
  return undefined;
}

/** `body` followed by `path` joined with dots, as validation issues name a place in the body. */
const bodyPath = (path: string[]) => ['body', ...path].join('.');

/**
 * 400 VALIDATION_ERROR naming the first string or object key of a parsed JSON body that is not
 * well-formed UTF-16 (an unpaired surrogate, which JSON's `\ud800` escape allows), or undefined when
 * there is none. For a key, the path of its object. Review finding, session 18: node-postgres
 * stores such a string as U+FFFD, so names, subjects, reasons, … were changed without an error;
 * checked once for every route behind the app's JSON parser (app.ts; but those whose config sets `stringsCheckedPerItem`) and for better-auth's bodies (auth.mount.ts),
 * as the send body's own check does (emails/send-fields.schema.ts `refuseUnstorableStrings`).
 */
export function illFormedStringError(body: string, value: unknown): AppError | undefined {
  if (!SURROGATE_ESCAPE.test(body)) return undefined;
  const hit = findInJson(value, (node) => {
    if (typeof node === 'string') {
      return node.isWellFormed()
        ? undefined
        : 'must be well-formed Unicode (no unpaired UTF-16 surrogate such as \\ud800)';
    }
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return undefined;
    return Object.keys(node).every((key) => key.isWellFormed())
      ? undefined
      : 'has a key that is not well-formed Unicode (an unpaired UTF-16 surrogate such as \\ud800)';
  });
  return hit && validationError([{ path: bodyPath(hit.path), message: hit.found }]);
}

/**
 * Why Fastify's JSON parser refused `body` when the text itself is well-formed JSON: it holds a
 * `__proto__` key or a `constructor` object with a `prototype` key, which the parser
 * (secure-json-parse) refuses against prototype poisoning but reports as malformed JSON. 400
 * INVALID_INPUT with `details.reason` FORBIDDEN_KEY and `details.path`, the key's place (review
 * finding, session 18); undefined when `body` is not JSON at all. Runs on refused bodies only.
 */
export function forbiddenKeyError(body: string): AppError | undefined {
  let value: unknown;
  try {
    // secure-json-parse skips a leading byte-order mark; JSON.parse does not.
    value = JSON.parse(body.charCodeAt(0) === 0xfeff ? body.slice(1) : body);
  } catch {
    return undefined;
  }
  const hit = findInJson(value, (node) => {
    if (node === null || typeof node !== 'object') return undefined;
    if (Object.hasOwn(node, '__proto__')) return '__proto__';
    const ctor: unknown = Object.hasOwn(node, 'constructor') ? Reflect.get(node, 'constructor') : undefined;
    return ctor !== null && typeof ctor === 'object' && Object.hasOwn(ctor, 'prototype')
      ? 'constructor.prototype'
      : undefined;
  });
  if (!hit) return undefined;
  const path = bodyPath([...hit.path, hit.found]);
  return new AppError('INVALID_INPUT', `JSON bodies may not hold a "${hit.found}" key (at ${path})`, {
    reason: 'FORBIDDEN_KEY',
    path,
  });
}

/**
 * {@link illFormedStringError} for a body not parsed yet (better-auth's, which reach it as a raw
 * stream, auth.mount.ts): undefined for a body without a surrogate escape, nested deeper than
 * {@link MAX_JSON_DEPTH}, or not JSON (better-auth answers those itself).
 */
export function illFormedStringErrorInText(body: string): AppError | undefined {
  if (!SURROGATE_ESCAPE.test(body) || jsonDepth(body) > MAX_JSON_DEPTH) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  return illFormedStringError(body, value);
}
