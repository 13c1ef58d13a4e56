import { describe, expect, it } from 'vitest';
import {
  applyRecipientEvent,
  type ImpliedFrom,
  impliedRecipientState,
  presentRecipients,
  recipientsOf,
} from './email-recipients.ts';

const sentAt = new Date('2026-11-23T10:00:00.000Z');
const email = (overrides: Partial<ImpliedFrom> = {}): ImpliedFrom => ({
  status: 'sent',
  errorMessage: null,
  sentAt,
  deliveredAt: null,
  openedAt: null,
  clickedAt: null,
  bouncedAt: null,
  failedAt: null,
  spamAt: null,
  ...overrides,
});
const at = (minute: number) => new Date(`2026-11-23T10:${String(minute).padStart(2, '0')}:00.000Z`);

describe('recipients of an email (issue #11)', () => {
  it('lists to, cc, bcc in order, each bare address once under its first kind', () => {
    expect(
      recipientsOf(['Ada <Ada@Example.COM>'], ['bob@example.com', 'ada@example.com'], ['cid@example.com']),
    ).toEqual([
      { address: 'Ada@example.com', key: 'ada@example.com', kind: 'to' },
      { address: 'bob@example.com', key: 'bob@example.com', kind: 'cc' },
      { address: 'cid@example.com', key: 'cid@example.com', kind: 'bcc' },
    ]);
  });

  it('implies the email state for a lone recipient, only `sent` for one of several', () => {
    const opened = email({ status: 'opened', deliveredAt: at(1), openedAt: at(2) });
    expect(impliedRecipientState(opened, 1)).toMatchObject({
      status: 'opened',
      deliveredAt: at(1),
      openedAt: at(2),
    });
    expect(impliedRecipientState(opened, 3)).toMatchObject({
      status: 'sent',
      sentAt,
      deliveredAt: null,
      openedAt: null,
    });
    const failed = email({
      status: 'failed',
      sentAt: null,
      failedAt: at(3),
      errorMessage: 'suppressed: manual',
    });
    expect(impliedRecipientState(failed, 3)).toMatchObject({
      status: 'failed',
      failedAt: at(3),
      diagnostic: 'suppressed: manual',
    });
  });

  it('moves a recipient forward only, sets each timestamp once, keeps soft bounces and deferrals as news', () => {
    let state = impliedRecipientState(email(), 2);
    state = applyRecipientEvent(state, { kind: 'deferral', at: at(1), diagnostic: '421 try later' });
    expect(state).toMatchObject({
      status: 'sent',
      deferredAt: at(1),
      diagnostic: '421 try later',
      bounceType: null,
    });
    state = applyRecipientEvent(state, { kind: 'soft_bounce', at: at(2), diagnostic: 'mailbox full' });
    expect(state).toMatchObject({ status: 'sent', bounceType: 'soft', diagnostic: 'mailbox full' });
    state = applyRecipientEvent(state, { kind: 'opened', at: at(3) });
    state = applyRecipientEvent(state, { kind: 'delivered', at: at(4) });
    expect(state).toMatchObject({ status: 'opened', openedAt: at(3), deliveredAt: null });
    const late = applyRecipientEvent(state, { kind: 'bounced', at: at(5), diagnostic: '550 gone' });
    expect(late).toEqual(state);
    const bounced = applyRecipientEvent(impliedRecipientState(email(), 2), {
      kind: 'bounced',
      at: at(6),
      diagnostic: '550 gone',
    });
    expect(bounced).toMatchObject({
      status: 'bounced',
      bounceType: 'hard',
      bouncedAt: at(6),
      diagnostic: '550 gone',
    });
  });

  it('presents written rows over the implied state, timestamps as ISO strings', () => {
    const view = presentRecipients(
      { ...email(), toAddresses: ['ann@example.com', 'bob@example.com'] },
      [],
      [],
      [
        {
          emailId: 'eml_1',
          teamId: 'team_1',
          address: 'bob@example.com',
          kind: 'to',
          ...applyRecipientEvent(impliedRecipientState(email(), 2), {
            kind: 'bounced',
            at: at(7),
            diagnostic: 'x',
          }),
          updatedAt: at(7),
        },
      ],
    );
    expect(view.map((r) => [r.address, r.status, r.sentAt, r.bouncedAt])).toEqual([
      ['ann@example.com', 'sent', sentAt.toISOString(), null],
      ['bob@example.com', 'bounced', sentAt.toISOString(), at(7).toISOString()],
    ]);
  });
});
