/** Deepest nesting of objects and arrays a JSON request body may have. */
export const MAX_JSON_DEPTH = 64;

/**
 * The nesting depth of a JSON text (0 for a scalar), counted in one pass over the raw characters,
 * brackets inside strings ignored. Checked before parsing: a body nested thousands deep parses, but
 * overflows the stack later wherever the value is serialised again (e.g. into a jsonb column).
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return deepest;
}
