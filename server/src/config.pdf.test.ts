import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

describe('PDF renderer credentials (postwright pdf-renderer)', () => {
  it('reads PDF_RENDERER_USERNAME and PDF_RENDERER_PASSWORD together', () => {
    expect(loadConfig({ PDF_RENDERER_USERNAME: 'pdf', PDF_RENDERER_PASSWORD: 's3cret' })).toMatchObject({
      PDF_RENDERER_USERNAME: 'pdf',
      PDF_RENDERER_PASSWORD: 's3cret',
    });
    expect(loadConfig({}).PDF_RENDERER_USERNAME).toBeUndefined();
  });

  it.each([
    [
      { PDF_RENDERER_USERNAME: 'pdf' },
      'Invalid PDF_RENDERER_PASSWORD: required when PDF_RENDERER_USERNAME is set',
    ],
    [
      { PDF_RENDERER_PASSWORD: 's3cret' },
      'Invalid PDF_RENDERER_USERNAME: required when PDF_RENDERER_PASSWORD is set',
    ],
    [
      { PDF_RENDERER_USERNAME: 'a:b', PDF_RENDERER_PASSWORD: 's3cret' },
      'Invalid PDF_RENDERER_USERNAME: must not contain ":" (HTTP Basic, RFC 7617)',
    ],
  ])('refuses %o without echoing the secret', (env, message) => {
    const error = (() => {
      try {
        loadConfig(env);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(message);
    expect((error as Error).message).not.toContain('s3cret');
  });
});
