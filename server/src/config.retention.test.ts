import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

describe('LOG_RETENTION_DAYS (data retention)', () => {
  it('is unset by default, and empty means unset: logs are kept for ever', () => {
    expect(loadConfig({}).LOG_RETENTION_DAYS).toBeUndefined();
    expect(loadConfig({ LOG_RETENTION_DAYS: '' }).LOG_RETENTION_DAYS).toBeUndefined();
  });

  it('reads whole days from 1 to 36500', () => {
    expect(loadConfig({ LOG_RETENTION_DAYS: '1' }).LOG_RETENTION_DAYS).toBe(1);
    expect(loadConfig({ LOG_RETENTION_DAYS: '90' }).LOG_RETENTION_DAYS).toBe(90);
    expect(loadConfig({ LOG_RETENTION_DAYS: '36500' }).LOG_RETENTION_DAYS).toBe(36500);
  });

  it('refuses anything else with a one-line error naming the variable', () => {
    for (const bad of ['0', '36501', '-1', '1.5', '30d', ' 30', '0x10', '1e3', '100000']) {
      let error: unknown;
      try {
        loadConfig({ LOG_RETENTION_DAYS: bad });
      } catch (caught) {
        error = caught;
      }
      expect(error, bad).toBeInstanceOf(ConfigError);
      expect((error as Error).message, bad).toBe(
        'Invalid LOG_RETENTION_DAYS: must be a whole number of days from 1 to 36500',
      );
    }
  });
});
