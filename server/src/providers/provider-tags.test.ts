import { describe, expect, it } from 'vitest';
import { restrictedTags, tagsRefusedByRestrictedProviders } from './provider-tags.ts';

describe('tags for Amazon SES and Resend (review finding, session 13)', () => {
  it('names the tags those providers refuse: anything but ASCII letters, digits, _ and -, or over 256', () => {
    expect(
      tagsRefusedByRestrictedProviders({
        campaign: 'spring-sale_2',
        spaced: 'spring sale',
        accented: 'été',
        'dotted.name': 'x',
        long: 'x'.repeat(257),
        empty: '',
      }),
    ).toEqual(['spaced', 'accented', 'dotted.name', 'long', 'empty']);
    expect(tagsRefusedByRestrictedProviders(undefined)).toEqual([]);
  });

  it('maps tags into their alphabet when such a provider gets them anyway (a fallback adapter)', () => {
    expect(
      restrictedTags({
        campaign: 'spring sale',
        'a.b': 'été',
        a_b: 'dropped: maps onto a.b',
        empty: '',
        long: 'y'.repeat(300),
      }),
    ).toEqual([
      { name: 'campaign', value: 'spring_sale' },
      { name: 'a_b', value: '_t_' },
      { name: 'empty', value: '_' },
      { name: 'long', value: 'y'.repeat(256) },
    ]);
  });
});
