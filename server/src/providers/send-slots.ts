import { KeyedSlots } from '../keyed-slots.ts';
import { ProviderError } from './types.ts';

/**
 * Sends in progress per adapter, capped: a {@link KeyedSlots} whose wait given up on the send's
 * signal is a transient ProviderError (EABORT), nothing sent. The worker takes a slot before it
 * starts a send's deadline, so the deadline measures the send itself, not the wait behind other
 * sends of the same adapter; the cap equals the adapter's pooled connections, so a send that has
 * its slot never queues inside the pool.
 */
export class SendSlots extends KeyedSlots {
  constructor() {
    super(abortedWhileWaiting);
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
