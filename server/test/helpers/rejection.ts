/**
 * What `promise` rejected with, or undefined when it resolved: for tests that check an error's
 * fields (`code`, class) rather than only that something failed.
 */
export function rejectionOf<E = NodeJS.ErrnoException>(promise: Promise<unknown>): Promise<E | undefined> {
  return promise.then(
    () => undefined,
    (error: E) => error,
  );
}
