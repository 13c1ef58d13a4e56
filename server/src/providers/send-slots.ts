import { ProviderError } from './types.ts';

interface Waiter {
  grant(): void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

interface Slots {
  busy: number;
  waiting: Waiter[];
}

/**
 * Sends in progress per adapter, capped (a counting semaphore per key, first come first served;
 * the log reads of a team use one too, emails/log-read-slots.ts).
 * The worker takes a slot before it starts a send's deadline, so the deadline measures the send
 * itself, not the wait behind other sends of the same adapter; the cap equals the adapter's pooled
 * connections, so a send that has its slot never queues inside the pool.
 */
export class SendSlots {
  readonly #slots = new Map<string, Slots>();

  /**
   * Waits for one of `limit` slots of `key`; resolves with the function that gives it back (call it
   * once). Rejects with a transient ProviderError (EABORT) when `signal` aborts first.
   */
  acquire(key: string, limit: number, signal?: AbortSignal): Promise<() => void> {
    const slots = this.#slots.get(key) ?? { busy: 0, waiting: [] };
    this.#slots.set(key, slots);
    const release = this.#releaser(key, slots);
    if (signal?.aborted) return Promise.reject(abortedWhileWaiting(signal));
    if (slots.busy < limit) {
      slots.busy += 1;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        signal,
        grant: () => {
          signal?.removeEventListener('abort', waiter.onAbort);
          resolve(release);
        },
        onAbort: () => {
          slots.waiting.splice(slots.waiting.indexOf(waiter), 1);
          reject(abortedWhileWaiting(signal!));
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      slots.waiting.push(waiter);
    });
  }

  /** Slots of `key` in use (sends in progress). */
  busy(key: string): number {
    return this.#slots.get(key)?.busy ?? 0;
  }

  /** Acquisitions of `key` waiting for a slot. */
  waiting(key: string): number {
    return this.#slots.get(key)?.waiting.length ?? 0;
  }

  #releaser(key: string, slots: Slots): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = slots.waiting.shift();
      if (next) {
        next.grant(); // the slot passes straight to the next waiter
        return;
      }
      slots.busy -= 1;
      if (slots.busy === 0) this.#slots.delete(key);
    };
  }
}

function abortedWhileWaiting(signal: AbortSignal): ProviderError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new ProviderError(
    `Send given up (${reason}) while waiting for a connection, before anything was sent`,
    {
      permanent: false,
      providerCode: 'EABORT',
    },
  );
}
