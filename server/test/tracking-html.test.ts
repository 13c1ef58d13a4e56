import { describe, expect, it } from 'vitest';
import { isMachineHit } from '../src/modules/tracking/index.ts';
import { signTrackingToken, trackingKey, verifyTrackingToken } from '../src/tracking/tokens.ts';
import { addTracking, MAX_TRACKED_LINKS, trackEmailHtml } from '../src/tracking/track-html.ts';

const click = (url: string) => `https://t.test/c/[${url}]`;
const PIXEL = '<img src="https://t.test/o" width="1" height="1" alt=""';

describe('tracking HTML rewriting (htmlparser2)', () => {
  it('rewrites only the href of http(s) <a> and <area>, keeping the rest byte for byte', () => {
    const html = [
      '<!DOCTYPE html><html><head><style>a{color:red}</style></head><body>',
      '<a class=x HREF="HTTPS://Example.com/a?b=1&amp;c=2" id=1>x</a>',
      "<a href='http://example.org/u'>u</a>",
      '<a href=https://example.net/unquoted>q</a>',
      '<area shape="rect" href="https://example.com/area">',
      '<a href="mailto:a@b.test">m</a><a href="tel:+1555">t</a><a href="#top">#</a><a href="/relative">r</a>',
      '<a href="ftp://example.com/f">f</a><a href="javascript:alert(1)">j</a><a href="https://[bad">b</a>',
      '<a data-pw-notrack href="https://example.com/no">n</a>',
      '<!-- <a href="https://example.com/comment"> --><script>var s = \'<a href="https://example.com/s">\';</script>',
      '<link href="https://example.com/style.css" rel="stylesheet">',
      '<a href="https://example.com/first" href="https://example.com/second">dup</a>',
      '<p title=\'href="https://example.com/t"\'>keep &amp; keep</p></body></html>',
    ].join('\n');
    const out = addTracking(html, { clickUrl: click });
    const expected = html
      .replace(
        'HREF="HTTPS://Example.com/a?b=1&amp;c=2"',
        `href="${click('https://example.com/a?b=1&c=2').replace('&', '&amp;')}"`,
      )
      .replace("href='http://example.org/u'", `href="${click('http://example.org/u')}"`)
      .replace('href=https://example.net/unquoted', `href="${click('https://example.net/unquoted')}"`)
      .replace('href="https://example.com/area"', `href="${click('https://example.com/area')}"`)
      .replace('href="https://example.com/first"', `href="${click('https://example.com/first')}"`);
    expect(out).toBe(expected);
  });

  it(`tracks the first MAX_TRACKED_LINKS links and leaves later ones as written`, () => {
    // Review finding, session 16: 52,000 links cost 1.4 s of the worker per email.
    const html = Array.from(
      { length: MAX_TRACKED_LINKS + 5 },
      (_, i) => `<a href="https://e.test/${i}">${i}</a>`,
    ).join('');
    const out = addTracking(html, { clickUrl: click });
    expect(out.match(/https:\/\/t\.test\/c\//g)).toHaveLength(MAX_TRACKED_LINKS);
    expect(out).toContain(`href="${click(`https://e.test/${MAX_TRACKED_LINKS - 1}`)}"`);
    expect(out).toContain(`<a href="https://e.test/${MAX_TRACKED_LINKS}">`);
  });

  it('puts the pixel before the last </body>, or at the end without one', () => {
    expect(addTracking('<html><body><p>a</p></body></html>', { pixelUrl: 'https://t.test/o' })).toMatch(
      new RegExp(`^<html><body><p>a</p>${PIXEL}[^>]*/></body></html>$`),
    );
    expect(addTracking('<p>a</p>', { pixelUrl: 'https://t.test/o' })).toMatch(
      new RegExp(`^<p>a</p>${PIXEL}[^>]*/>$`),
    );
  });

  it('escapes what it writes into attributes', () => {
    const out = addTracking('<a href="https://e.test/">x</a>', { clickUrl: () => 'https://t.test/?a="b"&c' });
    expect(out).toBe('<a href="https://t.test/?a=&quot;b&quot;&amp;c">x</a>');
  });

  it('leaves the HTML untouched (not even parsed) when both settings are off', () => {
    const html = '<a href="https://e.test/">x</a><broken <<';
    const deps = { encryptionKey: Buffer.alloc(32, 1), config: { BASE_URL: 'https://pw.test' } };
    const settings = {
      log: { id: 'eml_1', teamId: 'team_1' },
      version: { trackOpens: false, trackClicks: false },
    };
    expect(trackEmailHtml(html, settings, deps)).toBe(html);
    const overridden = trackEmailHtml(html, { ...settings, fields: { trackClicks: true } }, deps);
    const token = /https:\/\/pw\.test\/t\/c\/([^"]+)"/.exec(overridden)?.[1];
    expect(verifyTrackingToken(trackingKey(deps.encryptionKey), token!, 'click')).toEqual({
      kind: 'click',
      emailId: 'eml_1',
      teamId: 'team_1',
      url: 'https://e.test/',
    });
  });
});

describe('tracking tokens', () => {
  const key = trackingKey(Buffer.alloc(32, 3));

  it('derive a key of their own from ENCRYPTION_KEY (not the key itself)', () => {
    expect(key).toHaveLength(32);
    expect(key.equals(Buffer.alloc(32, 3))).toBe(false);
    expect(trackingKey(Buffer.alloc(32, 4)).equals(key)).toBe(false);
  });

  it('verify only under their key and for their kind', () => {
    const open = signTrackingToken(key, { kind: 'open', emailId: 'eml_1', teamId: 'team_1' });
    expect(verifyTrackingToken(key, open, 'open')).toEqual({
      kind: 'open',
      emailId: 'eml_1',
      teamId: 'team_1',
    });
    expect(verifyTrackingToken(key, open, 'click')).toBeUndefined();
    expect(verifyTrackingToken(trackingKey(Buffer.alloc(32, 4)), open, 'open')).toBeUndefined();
    expect(verifyTrackingToken(key, `${open}A`, 'open')).toBeUndefined();
    expect(verifyTrackingToken(key, '', 'open')).toBeUndefined();
    expect(verifyTrackingToken(key, '.', 'open')).toBeUndefined();
  });
});

describe('which hits count (pre-fetch rule)', () => {
  it('does not count HEAD, prefetch hints or known scanners; counts mail clients and image proxies', () => {
    const ua = (agent: string) => ({ 'user-agent': agent });
    expect(isMachineHit('HEAD', ua('Mozilla/5.0'))).toBe(true);
    expect(isMachineHit('GET', { ...ua('Mozilla/5.0'), purpose: 'prefetch' })).toBe(true);
    expect(isMachineHit('GET', { ...ua('Mozilla/5.0'), 'sec-purpose': 'prefetch;prerender' })).toBe(true);
    expect(isMachineHit('GET', { ...ua('Mozilla/5.0'), 'x-moz': 'prefetch' })).toBe(true);
    for (const agent of [
      'Slackbot-LinkExpanding 1.0',
      'curl/8.5.0',
      'Mozilla/5.0 (compatible; Googlebot/2.1)',
      'Mimecast',
    ]) {
      expect(isMachineHit('GET', ua(agent)), agent).toBe(true);
    }
    for (const agent of [
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
      'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)',
      'Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17126; Pro)',
      'YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html',
    ]) {
      expect(isMachineHit('GET', ua(agent)), agent).toBe(false);
    }
  });
});
