/**
 * Gives back the heap that start-up used and no longer needs (issue #9: idle memory).
 *
 * Start-up (migrations, module compilation, route schemas, the OpenAPI document) grows V8's young
 * generation to its maximum (2 × `--max-semi-space-size`, 32 MB with the start script's 16) and
 * leaves the old generation fragmented; V8 keeps both committed while the process idles (measured:
 * node PSS 166 → 114 MB after one trim). A memory-reducing full collection ("last resort", the
 * one V8 runs before an out-of-memory) shrinks the young generation back to its initial size and
 * compacts the old one; both grow again on their own under load.
 *
 * Node.js has no public call for that collection; V8's `gc` extension has, so this turns it on
 * with `--expose-gc` at runtime and takes `gc` from a fresh context, leaving the global object of
 * the application untouched (the pattern of Node's own v8.setFlagsFromString documentation).
 */
import v8 from 'node:v8';
import vm from 'node:vm';

type GcFunction = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let gc: GcFunction | undefined;

/** Runs one memory-reducing full collection now (synchronous; tens of ms on a ~50 MB heap). */
export function trimHeap(): void {
  if (!gc) {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as GcFunction;
  }
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** Calls {@link trimHeap} once, `delayMs` from now, on a timer that does not keep the process alive. */
export function trimHeapAfterStart(delayMs = 3_000): void {
  setTimeout(trimHeap, delayMs).unref();
}
