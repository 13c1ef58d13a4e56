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

/**
 * Review finding (newuser 4): a URL or `host:port` in PDF_ALLOWED_IMAGE_HOSTS was kept as written,
 * matched no image URL's host, and every image was blocked with no start-up message.
 */
describe('PDF_ALLOWED_IMAGE_HOSTS', () => {
  const hosts = (value: string) => loadConfig({ PDF_ALLOWED_IMAGE_HOSTS: value }).PDF_ALLOWED_IMAGE_HOSTS;
  /** Whether an image at `url` is allowed by `hosts`, as the bundled renderer compares (chromium-pool.ts). */
  const allows = (list: string[], url: string) => list.includes(new URL(url).hostname.toLowerCase());

  it('reduces URLs and host:port entries to their host, which then matches the image URLs', () => {
    const list = hosts(
      'http://localhost:3000/, localhost:3000, https://CDN.Example.com/images/, 10.0.0.5:9000, s3.example.com',
    );
    expect(list).toEqual(['localhost', 'localhost', 'cdn.example.com', '10.0.0.5', 's3.example.com']);
    expect(allows(list, 'http://localhost:3000/files/a.png')).toBe(true);
    expect(allows(list, 'https://cdn.example.com/x.png')).toBe(true);
    expect(allows(list, 'http://10.0.0.5:9000/bucket/b.png')).toBe(true);
    expect(hosts('https://bücher.example/')).toEqual(['xn--bcher-kva.example']);
    // A final dot (review of session 19: kept, it never matched).
    expect(hosts('images.example.com., https://cdn.example.com./x')).toEqual([
      'images.example.com',
      'cdn.example.com',
    ]);
    expect(allows(hosts('images.example.com.'), 'https://images.example.com/x.png')).toBe(true);
    expect(loadConfig({}).PDF_ALLOWED_IMAGE_HOSTS).toEqual([]);
  });

  it.each([
    ['x.com/images', '"x.com/images" is not a host name, an IPv4 address or a URL (e.g. images.example.com)'],
    [
      '*.example.com',
      '"*.example.com" is not a host name, an IPv4 address or a URL (e.g. images.example.com)',
    ],
    [
      'ok.example.com, http://',
      '"http://" is not a host name, an IPv4 address or a URL (e.g. images.example.com)',
    ],
    [
      '[::1]:3000',
      '"[::1]:3000" is an IPv6 address, which the renderers\' Content-Security-Policy cannot name: use a host name (e.g. images.example.com)',
    ],
    [
      'minio_files',
      '"minio_files" has "_", which the renderers\' Content-Security-Policy cannot name: use a host name without it (e.g. images.example.com)',
    ],
  ])('refuses %j in one line naming the variable and the entry', (value, message) => {
    expect(() => loadConfig({ PDF_ALLOWED_IMAGE_HOSTS: value })).toThrow(
      new ConfigError(`Invalid PDF_ALLOWED_IMAGE_HOSTS: ${message}`),
    );
  });
});
