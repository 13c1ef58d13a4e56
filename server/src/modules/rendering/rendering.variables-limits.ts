/**
 * Size limits of the `variables` a caller renders a template with (issue #8): a render costs
 * time in proportion to what the template walks, and the caller chooses how much there is to
 * walk. Checked when a request is validated, before anything renders or is stored (the email log
 * keeps the variables), by one walk over the parsed value that stops at the first limit passed,
 * so a refused request costs at most about `maxBytes` of work, whatever its size.
 */
import { z } from 'zod';
import type { Config } from '../../config.ts';

/** The limits, from `SEND_VARIABLES_MAX_BYTES` and `SEND_VARIABLES_MAX_ARRAY_LENGTH`. */
export interface VariablesLimits {
  /** Bytes of the variables as JSON text, UTF-8 (escape sequences counted as the character). */
  maxBytes: number;
  /** Elements of any one array anywhere in the variables. */
  maxArrayLength: number;
}

/** The first limit a value passes: `path` leads from the variables object to where it was found. */
export interface VariablesLimitIssue {
  limit: 'maxBytes' | 'maxArrayLength';
  path: (string | number)[];
  message: string;
}

/** {@link VariablesLimits} of a configuration. */
export function variablesLimitsOf(
  config: Pick<Config, 'SEND_VARIABLES_MAX_BYTES' | 'SEND_VARIABLES_MAX_ARRAY_LENGTH'>,
): VariablesLimits {
  return {
    maxBytes: config.SEND_VARIABLES_MAX_BYTES,
    maxArrayLength: config.SEND_VARIABLES_MAX_ARRAY_LENGTH,
  };
}

/** JSON text length of a scalar a JSON body can hold (numbers print as in JSON.stringify). */
function scalarBytes(value: unknown): number {
  if (typeof value === 'number') return String(value).length;
  if (typeof value === 'boolean') return value ? 4 : 5;
  return 4; // null (and anything JSON would print as null)
}

/**
 * The first limit of `limits` that `variables` passes, or null. Bytes are those of
 * `JSON.stringify(variables)` in UTF-8, escape sequences counted as the one character they stand
 * for; an array longer than `maxArrayLength` is refused before its elements are looked at.
 * The walk stops as soon as a limit is passed: a string is measured only when its length (a lower
 * bound of its UTF-8 bytes) still fits. Expects a value parsed from JSON (no cycles; the body
 * parser caps nesting at MAX_JSON_DEPTH, which bounds the recursion).
 */
export function checkVariablesLimits(
  variables: unknown,
  limits: VariablesLimits,
): VariablesLimitIssue | null {
  let bytes = 0;
  const path: (string | number)[] = [];
  const tooLarge = (): VariablesLimitIssue => ({
    limit: 'maxBytes',
    path: [],
    message: `Variables must be at most ${limits.maxBytes} bytes as JSON (SEND_VARIABLES_MAX_BYTES)`,
  });
  const add = (count: number) => {
    bytes += count;
    return bytes > limits.maxBytes;
  };
  const addString = (text: string) =>
    text.length + 2 > limits.maxBytes - bytes ? add(text.length + 2) : add(Buffer.byteLength(text) + 2);

  const visit = (value: unknown): VariablesLimitIssue | null => {
    if (typeof value === 'string') return addString(value) ? tooLarge() : null;
    if (value === null || typeof value !== 'object') return add(scalarBytes(value)) ? tooLarge() : null;
    if (Array.isArray(value)) {
      if (value.length > limits.maxArrayLength) {
        return {
          limit: 'maxArrayLength',
          path: [...path],
          message: `Arrays in variables must have at most ${limits.maxArrayLength} items, this one has ${value.length} (SEND_VARIABLES_MAX_ARRAY_LENGTH)`,
        };
      }
      if (add(value.length > 0 ? value.length + 1 : 2)) return tooLarge(); // brackets and commas
      for (let index = 0; index < value.length; index++) {
        path.push(index);
        const issue = visit(value[index]);
        if (issue) return issue;
        path.pop();
      }
      return null;
    }
    if (add(1)) return tooLarge(); // '{'; each entry adds its ',' or the closing '}'
    let entries = 0;
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      entries++;
      if (addString(key) || add(2)) return tooLarge(); // "key" then ':' and ',' or '}'
      path.push(key);
      const issue = visit((value as Record<string, unknown>)[key]);
      if (issue) return issue;
      path.pop();
    }
    return entries === 0 && add(1) ? tooLarge() : null;
  };
  return visit(variables);
}

/**
 * The zod schema of a `variables` field: an object of any JSON values within `limits`. A value
 * over a limit fails validation with one issue at `variables` (bytes) or at the array
 * (`variables.items`), whose message names the limit and its value: the route answers
 * 400 VALIDATION_ERROR (spec "Errors": request validation failed).
 */
export function variablesSchema(limits: VariablesLimits) {
  return z
    .record(z.string(), z.unknown())
    .superRefine((variables, ctx) => {
      const issue = checkVariablesLimits(variables, limits);
      if (issue) ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message, input: variables });
    })
    .describe(
      `Values for the template's variables: at most ${limits.maxBytes} bytes as JSON, arrays at most ${limits.maxArrayLength} items`,
    );
}
