import { describe, expect, it } from 'vitest';
import { dateOf, isFreshTimestamp } from './provider-event.ts';

describe('dateOf (the time of a provider event)', () => {
  const fallback = new Date('2026-11-23T12:00:00.000Z');

  it('reads seconds since the epoch (number or digits) and ISO strings', () => {
    expect(dateOf(1_700_000_000, fallback).toISOString()).toBe('2023-11-14T22:13:20.000Z');
    expect(dateOf('1700000000.5', fallback).toISOString()).toBe('2023-11-14T22:13:20.500Z');
    expect(dateOf('2026-11-23T12:00:01.000Z', fallback).toISOString()).toBe('2026-11-23T12:00:01.000Z');
    expect(dateOf(undefined, fallback)).toBe(fallback);
    expect(dateOf('yesterday', fallback)).toBe(fallback);
  });

  // A payload's number far out of range used to give an Invalid Date, then a 500 at the write.
  it.each([
    1e20,
    -1e13,
    '99999999999999999999',
    '+275760-09-13T00:00:00.000Z',
    '-271821-04-20T00:00:00.000Z',
    '+010000-01-01T00:00:00.000Z',
    -1,
  ])('gives the fallback for %s, which is no provider clock', (value) => {
    expect(dateOf(value, fallback)).toBe(fallback);
  });
});

describe('isFreshTimestamp (signature timestamps, seconds)', () => {
  const now = Date.parse('2026-11-23T12:00:00.000Z');
  const seconds = (offsetMs: number) => String(Math.floor((now + offsetMs) / 1000));

  it('accepts a timestamp within the window either way, refuses one outside or not a number', () => {
    expect(isFreshTimestamp(seconds(0), 300_000, now)).toBe(true);
    expect(isFreshTimestamp(seconds(-299_000), 300_000, now)).toBe(true);
    expect(isFreshTimestamp(seconds(299_000), 300_000, now)).toBe(true);
    expect(isFreshTimestamp(seconds(-301_000), 300_000, now)).toBe(false);
    expect(isFreshTimestamp(seconds(301_000), 300_000, now)).toBe(false);
    expect(isFreshTimestamp('1e3', 300_000, now)).toBe(false);
    expect(isFreshTimestamp('', 300_000, now)).toBe(false);
    expect(isFreshTimestamp('-1', 300_000, now)).toBe(false);
  });
});
