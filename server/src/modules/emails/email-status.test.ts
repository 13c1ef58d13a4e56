import { describe, expect, it } from 'vitest';
import { canTransition, EMAIL_STATUSES } from './email-status.ts';

describe('email status machine', () => {
  it('moves forward along the delivery path', () => {
    expect(canTransition('queued', 'sent')).toBe(true);
    expect(canTransition('sent', 'delivered')).toBe(true);
    expect(canTransition('delivered', 'opened')).toBe(true);
    expect(canTransition('opened', 'clicked')).toBe(true);
  });

  it('never moves backwards', () => {
    expect(canTransition('opened', 'delivered')).toBe(false);
    expect(canTransition('sent', 'queued')).toBe(false);
    expect(canTransition('clicked', 'opened')).toBe(false);
  });

  it('fails only from queued or sent, bounces only after sent or delivered', () => {
    const failFrom = EMAIL_STATUSES.filter((s) => canTransition(s, 'failed'));
    expect(failFrom).toEqual(['queued', 'sent']);
    const bounceFrom = EMAIL_STATUSES.filter((s) => canTransition(s, 'bounced'));
    expect(bounceFrom).toEqual(['sent', 'delivered']);
    const spamFrom = EMAIL_STATUSES.filter((s) => canTransition(s, 'spam'));
    expect(spamFrom).toEqual(['sent', 'delivered', 'opened', 'clicked']);
  });

  it('keeps terminal states terminal', () => {
    for (const to of EMAIL_STATUSES) {
      expect(canTransition('failed', to)).toBe(false);
      expect(canTransition('bounced', to)).toBe(false);
    }
  });
});
