/**
 * Storage keys: `/`-separated relative paths such as `team_01jd…/img_01jd….png`.
 * Each segment is 1-200 of `A-Z a-z 0-9 . _ -` and does not start with a dot, so `.`, `..`,
 * hidden files (the local disk's metadata sidecars), absolute paths and backslashes are impossible.
 */
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$/;
const MAX_KEY_LENGTH = 512;
const MAX_SEGMENTS = 8;

/** True when `key` is a valid storage key (see the module comment); safe to join under a root directory. */
export function isValidStorageKey(key: string): boolean {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) return false;
  const segments = key.split('/');
  return segments.length <= MAX_SEGMENTS && segments.every((segment) => SEGMENT.test(segment));
}

/** `key` as a URL path (each segment percent-encoded, slashes kept). */
export function keyToUrlPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

/** Throws when `key` is not a valid storage key: keys are built by the server, so this is a bug. */
export function assertValidStorageKey(key: string): void {
  if (!isValidStorageKey(key)) throw new Error(`invalid storage key: ${JSON.stringify(key)}`);
}
