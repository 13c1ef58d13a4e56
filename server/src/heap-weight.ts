/**
 * Estimated bytes a value parsed from JSON takes on V8's heap (64-bit, no pointer compression, as
 * Node.js ships): an object 56 bytes + 16 per property, an array 32 + 8 per element, a string 16 +
 * its length, a number 16, `true`/`false`/`null` nothing beyond the slot holding them. Calibrated on
 * Node.js 24: 2 MB of JSON holding 700,000 empty objects parse into 42.7 MB (64 bytes each, as
 * estimated); EmailBuilder's sample documents (3-32 KB) into 2-26 KB. Walks iteratively (no stack
 * overflow on deep values) and counts a shared object each time it is reached (JSON has none).
 * What caches weigh their entries with, so they are bounded in bytes and not only in entries: a
 * design is at most 2 MB of JSON but may parse into twenty times as much (review finding, session 13).
 * @returns the estimate in bytes.
 */
export function estimatedHeapBytes(value: unknown): number {
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') bytes += 16 + item.length;
    else if (typeof item === 'number') bytes += 16;
    else if (Array.isArray(item)) {
      bytes += 32 + 8 * item.length;
      for (const element of item) stack.push(element);
    } else if (item instanceof Date) bytes += 32;
    else if (item !== null && typeof item === 'object') {
      const values = Object.values(item);
      bytes += 56 + 16 * values.length;
      for (const element of values) stack.push(element);
    }
  }
  return bytes;
}

/**
 * How many values (objects, arrays, strings, numbers, booleans, nulls) `value` holds, itself
 * included, counting no further than `limit + 1`.
 * @returns the count, or `limit + 1` when there are more than `limit`.
 */
export function jsonValueCount(value: unknown, limit: number): number {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && count <= limit) {
    const item = stack.pop();
    count++;
    if (item !== null && typeof item === 'object') {
      for (const element of Array.isArray(item) ? item : Object.values(item)) stack.push(element);
    }
  }
  return Math.min(count, limit + 1);
}
