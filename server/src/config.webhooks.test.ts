import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

describe('webhook settings (issue #11)', () => {
  it('defaults to 8 attempts (7 delays), 30 s per attempt, private receivers refused', () => {
    const config = loadConfig({});
    expect(config.WEBHOOK_RETRY_SCHEDULE).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(config.WEBHOOK_TIMEOUT_SECONDS).toBe(30);
    expect(config.WEBHOOKS_ALLOW_PRIVATE).toBe(false);
  });

  it('reads a comma-separated schedule and refuses anything else naming the variable', () => {
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '1,2,3' }).WEBHOOK_RETRY_SCHEDULE).toEqual([1, 2, 3]);
    expect(loadConfig({ WEBHOOKS_ALLOW_PRIVATE: 'true' }).WEBHOOKS_ALLOW_PRIVATE).toBe(true);
    for (const bad of ['1,,2', '5s', '-1', '1, 2']) {
      expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: bad })).toThrow(/WEBHOOK_RETRY_SCHEDULE/);
    }
    expect(() => loadConfig({ WEBHOOK_TIMEOUT_SECONDS: '0' })).toThrow(/WEBHOOK_TIMEOUT_SECONDS/);
  });
});
