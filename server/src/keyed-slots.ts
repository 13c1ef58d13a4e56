interface Waiter {
  grant(): void;
  onAbort: () => void;
}

interface Slots {
  busy: number;
  waiting: Waiter[];
}

/**
 * A counting semaphore per key, first come first served: at most `limit` holders of a key at once.
 * Used for the sends in progress per adapter (providers/send-slots.ts), the log reads of a team
 * (emails/log-read-slots.ts) and tracking recordings (tracking.service.ts).
 */
export class KeyedSlots {
  readonly #slots = new Map<string, Slots>();
  readonly #abortError: (signal: AbortSignal) => unknown;

  /** @param abortError what `acquire` rejects with when its signal aborts (default: the signal's reason). */
  constructor(abortError: (signal: AbortSignal) => unknown = (signal) => signal.reason) {
    this.#abortError = abortError;
  }

  /**
   * Waits for one of `limit` slots of `key`; resolves with the function that gives it back (call it
   * once). Rejects with the constructor's `abortError` of the first of `signals` (one signal or
   * several) that aborts first, or is aborted already.
   */
  acquire(key: string, limit: number, signals?: AbortSignal | readonly AbortSignal[]): Promise<() => void> {
    const watched = signals === undefined ? [] : Array.isArray(signals) ? signals : [signals as AbortSignal];
    const aborted = watched.find((signal) => signal.aborted);
    if (aborted) return Promise.reject(this.#abortError(aborted));
    const slots = this.#slots.get(key) ?? { busy: 0, waiting: [] };
    this.#slots.set(key, slots);
    const release = this.#releaser(key, slots);
    if (slots.busy < limit) {
      slots.busy += 1;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      let firstAborted: AbortSignal | undefined;
      const unwatch = () => {
        for (const signal of watched) signal.removeEventListener('abort', onAbort);
      };
      const onAbort = (event: Event) => {
        firstAborted ??= event.target as AbortSignal;
        waiter.onAbort();
      };
      const waiter: Waiter = {
        grant: () => {
          unwatch();
          resolve(release);
        },
        onAbort: () => {
          unwatch();
          slots.waiting.splice(slots.waiting.indexOf(waiter), 1);
          reject(this.#abortError(firstAborted!));
        },
      };
      for (const signal of watched) signal.addEventListener('abort', onAbort, { once: true });
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
