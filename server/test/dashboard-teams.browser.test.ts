import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { addTeamMember } from './helpers/auth.ts';
import { buildDashboardIfStale } from './helpers/dashboard-build.ts';
import { createTemplateInDialog } from './helpers/dashboard-page.ts';
import { freePort } from './helpers/ports.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

/**
 * The dashboard when the session changes under a page (review findings, dashboard session), in
 * Chromium through playwright-core against the real server on PostgreSQL and a test SMTP server:
 * a team switched in another tab (the page names its team in `X-Postwright-Team`, a team route
 * answers 409 TEAM_SWITCHED, the page reloads on the new team and says so; `me` is asked again on
 * focus), a session signed out elsewhere (→ /login?redirectTo=…), a member removed from their
 * active team (→ switched to their other team), an invitation opened by another account (its own
 * message and Sign out), and two form fixes (clearing an adapter's default sender, the versions
 * history after a restore). The dashboard is built first when `web/dist` has no build or an older
 * one than `web/`'s sources. Skipped without Chromium, except under CI.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SETUP_TOKEN = 'test-setup-token-0123456789';
const PASSWORD = 'a long password';
const available = existsSync(CHROMIUM);
if (!available) {
  if (process.env.CI) throw new Error(`Chromium not found at ${CHROMIUM} (set CHROMIUM_PATH)`);
  console.warn(`Browser tests skipped: no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`);
}

interface Answer {
  status: number;
  /** The parsed body (any: answers of several routes, checked field by field). */
  json: any;
}

describe.skipIf(!available)('dashboard: teams and sessions across tabs', () => {
  let ctx: TestContext;
  let smtp: TestSmtpServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let acmeId: string;
  /** Vic's session cookies, kept from the invitation test (sign-in is rate-limited: 3 in 10 s). */
  let vicSession: Awaited<ReturnType<BrowserContext['cookies']>> = [];
  const consoleErrors: string[] = [];

  const go = (url: string) => page.goto(`${base}${url}`);
  /** A same-origin API call from page `p` (its cookie, its Origin), with extra `headers`. */
  const call = (
    p: Page,
    method: string,
    url: string,
    body?: object,
    headers: Record<string, string> = {},
  ): Promise<Answer> =>
    p.evaluate(
      async ([m, u, b, h]) => {
        const response = await fetch(u as string, {
          method: m as string,
          headers: { ...(b ? { 'content-type': 'application/json' } : {}), ...(h as object) },
          ...(b ? { body: JSON.stringify(b) } : {}),
        });
        const text = await response.text();
        return { status: response.status, json: text ? JSON.parse(text) : null };
      },
      [method, url, body, headers] as const,
    );
  const watch = (p: Page) => {
    p.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    p.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message}`));
  };
  const fillSignIn = async (p: Page, email: string) => {
    await p.getByLabel('Email').fill(email);
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByRole('button', { name: 'Sign in' }).click();
  };
  const signInAt = async (p: Page, email: string) => {
    await p.goto(`${base}/login`);
    await fillSignIn(p, email);
    await p.getByRole('button', { name: 'Sign out' }).waitFor();
  };
  const switcherOf = (p: Page) => p.getByRole('textbox', { name: 'Team' });
  /** Waits until the team switcher of `p` reads `label`; `step` names the wait in a failure. */
  const waitForSwitcher = (p: Page, label: string, step = '') =>
    waitFor(
      async () => ((await switcherOf(p).inputValue()) === label ? true : undefined),
      10_000,
      `switcher "${label}" ${step}`,
    );
  const apiKeyNames = async (p: Page) =>
    ((await call(p, 'GET', '/api/api-keys')).json.data as { name: string }[]).map((k) => k.name);

  beforeAll(async () => {
    buildDashboardIfStale(root);
    smtp = await startTestSmtpServer();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    ctx = await createTestContext('postgres', { BASE_URL: base });
    await ctx.app.listen({ port, host: '127.0.0.1' });
    await ctx.startWorkers();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(10_000);
    watch(page);
    // The first owner, through the setup page.
    await go(`/setup?token=${SETUP_TOKEN}`);
    await page.getByLabel('Your name').fill('Ada Owner');
    await page.getByLabel('Email').fill('ada@example.com');
    await page.getByLabel('Team name').fill('Acme');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create owner and team' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    acmeId = (await call(page, 'GET', '/api/auth/me')).json.data.team.id;
    // An SMTP adapter with a default sender, and an API key, through the API.
    const adapter = await call(page, 'POST', '/api/adapters', {
      name: 'Mail server',
      type: 'smtp',
      config: { host: '127.0.0.1', port: smtp.port },
      defaultFrom: 'Acme <hello@example.com>',
    });
    expect(adapter.status).toBe(201);
    expect((await call(page, 'POST', '/api/api-keys', { name: 'Acme key' })).status).toBe(201);
  });

  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
    await smtp?.close();
  });

  it('adapter edit: clearing the default sender clears it', async () => {
    await go('/adapters');
    const row = page.getByTestId('adapter-Mail server');
    await row.getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog');
    const sender = dialog.getByLabel('Default sender');
    await sender.waitFor();
    expect(await sender.inputValue()).toBe('Acme <hello@example.com>');
    await sender.fill('');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'detached' });
    const list = await call(page, 'GET', '/api/adapters');
    expect(list.json.data[0].defaultFrom).toBeNull();
    await row.getByRole('cell', { name: '—', exact: true }).waitFor();
    // The invitation emails below need a sender again.
    const restored = await call(page, 'PUT', `/api/adapters/${list.json.data[0].id}`, {
      defaultFrom: 'Acme <hello@example.com>',
    });
    expect(restored.status).toBe(200);
  });

  it('templates: a restored version shows in the open history at once', async () => {
    await go('/templates');
    await createTemplateInDialog(page, 'Welcome', 'Welcome, {{ name }}!');
    await page.getByRole('button', { name: 'Versions' }).click();
    const versions = page.getByRole('dialog');
    await versions.getByLabel('Snapshot name').fill('v-one');
    await versions.getByRole('button', { name: 'Save current as version' }).click();
    await versions.getByText('v-one').waitFor();
    page.once('dialog', (d) => void d.accept());
    await versions.getByRole('row', { name: /v-one/ }).getByRole('button', { name: 'Restore' }).click();
    await page.getByText('Version restored').waitFor();
    // Restoring saved the current content as "Restored from v-one": the open modal lists it.
    await versions.getByText('Restored from v-one').waitFor({ timeout: 5_000 });
    await page.keyboard.press('Escape');
  });

  it('the team header: a session call naming another team gets 409 TEAM_SWITCHED; API keys, me and header-less calls are unaffected', async () => {
    await go('/');
    const other = { 'x-postwright-team': 'team_01jz0000000000000000000000' };
    const refused = await call(page, 'GET', '/api/adapters', undefined, other);
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('CONFLICT');
    expect(refused.json.error.details).toEqual({ reason: 'TEAM_SWITCHED', teamId: acmeId });
    // A write is refused before it changes anything.
    const write = await call(page, 'POST', '/api/api-keys', { name: 'Refused key' }, other);
    expect(write.status).toBe(409);
    expect(await apiKeyNames(page)).not.toContain('Refused key');
    // Naming the session's team, or no team at all (curl, scripts): as before.
    expect(
      (await call(page, 'GET', '/api/adapters', undefined, { 'x-postwright-team': acmeId })).status,
    ).toBe(200);
    expect((await call(page, 'GET', '/api/adapters')).status).toBe(200);
    // The routes a page learns or changes its team with answer whatever it names.
    expect((await call(page, 'GET', '/api/auth/me', undefined, other)).status).toBe(200);
    expect((await call(page, 'GET', '/api/teams', undefined, other)).status).toBe(200);
    expect((await call(page, 'POST', '/api/auth/switch-team', { teamId: acmeId }, other)).status).toBe(200);
    // An API key on a route sessions share (GET /api/logs) is not checked against the header.
    const key = await call(page, 'POST', '/api/api-keys', { name: 'Logs key', scopes: ['logs:read'] });
    expect(key.status).toBe(201);
    const withKey = await fetch(`${base}/api/logs`, {
      headers: { 'x-api-key': key.json.data.key, ...other },
    });
    expect(withKey.status).toBe(200);
    // The dashboard sends the header on its calls.
    const sent = page.waitForRequest((r) => r.url().endsWith('/api/adapters'));
    await page.getByRole('link', { name: 'Adapters' }).click();
    expect((await sent).headers()['x-postwright-team']).toBe(acmeId);
  });

  it('a team switched in another tab: the page moves to that team and says so, and writes nothing to it', async () => {
    const tab2 = await context.newPage();
    watch(tab2);
    tab2.setDefaultTimeout(10_000);
    await go('/api-keys');
    await page.getByRole('cell', { name: 'Acme key' }).waitFor();
    await tab2.goto(`${base}/`);
    await tab2.getByRole('button', { name: 'New team' }).click();
    await tab2.getByRole('dialog').getByRole('textbox', { name: 'Team name' }).fill('Beta');
    await tab2.getByRole('button', { name: 'Create and switch' }).click();
    await waitForSwitcher(tab2, 'Beta (owner)');
    const betaId = (await call(tab2, 'GET', '/api/auth/me')).json.data.team.id;

    // The first tab, still naming Acme, navigates: the calls are refused, it reloads on Beta.
    await page.getByRole('link', { name: 'Adapters' }).click();
    await page.getByText('Your team was switched in another tab: now showing Beta').waitFor();
    await waitForSwitcher(page, 'Beta (owner)');
    await page.getByText(/No adapter yet/).waitFor();

    // The first tab lists Beta's keys; the second switches back to Acme; the first, still on Beta,
    // creates a key: refused, the page moves to Acme, and the key is in neither team.
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByText(/No API key yet/).waitFor();
    expect((await call(tab2, 'POST', '/api/auth/switch-team', { teamId: acmeId })).status).toBe(200);
    await page.getByRole('button', { name: 'New API key' }).click();
    await page.getByRole('dialog').getByRole('textbox', { name: 'Name', exact: true }).fill('Meant for Beta');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByText('Your team was switched in another tab: now showing Acme').waitFor();
    await waitForSwitcher(page, 'Acme (owner)');
    // The form opened for Beta is gone with Beta's page.
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await page.getByRole('cell', { name: 'Acme key' }).waitFor();
    expect(await apiKeyNames(page)).not.toContain('Meant for Beta');
    expect((await call(tab2, 'POST', '/api/auth/switch-team', { teamId: betaId })).status).toBe(200);
    expect(await apiKeyNames(tab2)).not.toContain('Meant for Beta');

    // The session is on Beta again: the first tab follows when it gets focus, before any click.
    // (What the browser fires when the tab is shown again: bubbles up to window, where TanStack
    // Query listens.)
    await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange', { bubbles: true })));
    await waitForSwitcher(page, 'Beta (owner)', 'after focus');
    await page.getByText(/No API key yet/).waitFor();

    // Back to Acme for the next tests, through the switcher.
    await switcherOf(page).click();
    await page.getByRole('option', { name: 'Acme (owner)' }).click();
    await page.getByRole('cell', { name: 'Acme key' }).waitFor();
    await tab2.close();
  });

  it('a session that ended elsewhere: the next call sends the page to sign-in, and back after it', async () => {
    await go('/');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    const tab2 = await context.newPage();
    await tab2.goto(`${base}/`);
    await tab2.getByRole('button', { name: 'Sign out' }).click();
    await tab2.getByRole('heading', { name: 'Sign in' }).waitFor();
    await tab2.close();
    await page.getByRole('link', { name: 'Logs' }).click();
    await page.waitForURL((url) => url.pathname === '/login', { timeout: 5_000 });
    expect(new URL(page.url()).searchParams.get('redirectTo')).toBe('/logs');
    await fillSignIn(page, 'ada@example.com');
    await page.getByRole('heading', { name: 'Logs' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/logs');
  });

  it('an invitation opened by another account, and a member removed from the active team', async () => {
    await go('/');
    const gamma = await call(page, 'POST', '/api/teams', { name: 'Gamma' });
    expect(gamma.status).toBe(201);
    // Vic has an account and is a member of Gamma; Ada invites them to Acme.
    await addTeamMember(ctx.app, { teamId: gamma.json.data.id }, 'member', {
      email: 'vic@example.com',
      password: PASSWORD,
      name: 'Vic',
    });
    expect((await call(page, 'POST', '/api/auth/switch-team', { teamId: acmeId })).status).toBe(200);
    const invitation = await call(page, 'POST', '/api/team/invitations', {
      email: 'vic@example.com',
      role: 'member',
    });
    expect(invitation.status).toBe(201);
    const mail = await waitFor(
      async () => smtp.messages.find((m) => m.envelopeTo.includes('vic@example.com')),
      20_000,
      'invitation email',
    );
    const link = `${mail.parsed.text ?? ''}`.match(/https?:\/\/\S+\/invite\/[^\s"<>)]+/)![0];

    // Ada (signed in) opens Vic's link: it says whom it is for and offers to sign out, not Accept.
    await page.goto(link);
    await page
      .getByText('This invitation is for vic@example.com, but you are signed in as ada@example.com')
      .waitFor();
    expect(await page.getByRole('button', { name: 'Accept invitation' }).count()).toBe(0);

    // Vic signs in and opens the link; then Ada's session replaces Vic's in that browser (as a
    // sign-in in another tab would; cookies copied, sign-in is rate-limited). Accept on the page still
    // saying "Vic" is refused with the server's own message, not as a matter of role.
    const vicContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const vicPage = await vicContext.newPage();
    watch(vicPage);
    vicPage.setDefaultTimeout(10_000);
    await signInAt(vicPage, 'vic@example.com');
    await vicPage.goto(link);
    await vicPage.getByText('Signed in as vic@example.com.').waitFor();
    const vicCookies = await vicContext.cookies();
    await vicContext.addCookies(await context.cookies());
    await vicPage.getByRole('button', { name: 'Accept invitation' }).click();
    const refused = vicPage.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('This invitation is for another email address');
    expect(await refused.textContent()).not.toMatch(/Your role/);
    await vicContext.addCookies(vicCookies);

    // Vic accepts, works in Acme; Ada removes Vic from Acme.
    await vicPage.reload();
    await vicPage.getByRole('button', { name: 'Accept invitation' }).click();
    await vicPage.getByRole('heading', { name: 'Overview' }).waitFor();
    await waitForSwitcher(vicPage, 'Acme (member)');
    const vicId = (await call(vicPage, 'GET', '/api/auth/me')).json.data.user.id;
    expect((await call(page, 'DELETE', `/api/team/members/${vicId}`)).status).toBe(200);
    expect((await call(vicPage, 'GET', '/api/templates')).json.error.details.reason).toBe(
      'TEAM_ACCESS_REVOKED',
    );

    // Vic's page moves the session to Gamma and says so, instead of "Not allowed" everywhere.
    await vicPage.reload();
    await vicPage
      .getByText(/You are no longer a member of the team you were working in: now in Gamma/)
      .waitFor();
    await waitForSwitcher(vicPage, 'Gamma (member)');
    expect((await call(vicPage, 'GET', '/api/templates')).status).toBe(200);
    await vicPage.getByRole('link', { name: 'Templates' }).click();
    await vicPage.getByRole('button', { name: 'New template' }).waitFor();
    expect(await vicPage.locator('main').innerText()).not.toMatch(/no longer a member|Not allowed/);
    // A 403 naming a permission the role lacks is still worded as one (members cannot list webhooks).
    await vicPage.getByRole('link', { name: 'Webhooks' }).click();
    await vicPage.getByText(/Your role in this team does not allow this/).waitFor();
    vicSession = await vicContext.cookies();
    await vicContext.close();

    // Ada, still on Vic's invitation, signs out from it: the page offers Vic's account.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('Create your account for vic@example.com').waitFor();
  });

  it('signing out and in as another user in one tab is not a team switched elsewhere', async () => {
    await context.addCookies(vicSession);
    await go('/');
    await waitForSwitcher(page, 'Gamma (member)');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await fillSignIn(page, 'ada@example.com');
    await waitForSwitcher(page, 'Acme (owner)');
    await page.waitForTimeout(500);
    expect(await page.getByText(/switched in another tab/).count()).toBe(0);
  });

  it('no script errors on any page above (failed requests are the 4xx the tests asked for)', () => {
    expect(consoleErrors.filter((e) => !e.startsWith('Failed to load resource'))).toEqual([]);
  });
});
