/**
 * Sets a fresh Postwright instance up for the send benchmark through its HTTP API, as an operator
 * would: first-run setup with the setup token (owner + team, session cookie), API keys with a high
 * rate limit, an SMTP adapter pointing at the sink, and a template made from the EmailBuilder.js
 * sample `welcome.json` with a Liquid variable in its subject and first text block.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** What the benchmark needs to send through the instance. */
export interface Instance {
  keys: string[];
  rateLimit: number;
  templateId: string;
  adapterId: string;
  teamId: string;
  cookie: string;
}

/** The limits tried for the benchmark's keys, highest first (another branch raises the maximum to 1,000,000/min). */
const RATE_LIMITS = [1_000_000, 10_000];

/** The sample document with `{{ first_name }}` in its first text block. */
export function welcomeDesign(
  root: string,
): Record<string, { type: string; data: { props?: Record<string, unknown> } }> {
  const file = path.join(root, 'server/test/fixtures/emailbuilder/welcome.json');
  const design = JSON.parse(readFileSync(file, 'utf8'));
  const text = Object.values(
    design as Record<string, { type: string; data: { props?: { text?: string } } }>,
  ).find((block) => block.type === 'Text');
  if (!text?.data.props?.text) throw new Error(`${file}: no Text block`);
  text.data.props.text = text.data.props.text.replace('Anna', '{{ first_name }}');
  return design;
}

async function call(
  baseUrl: string,
  method: string,
  url: string,
  body: object | undefined,
  headers: Record<string, string>,
): Promise<{ status: number; json: { data: Record<string, unknown> }; cookie: string }> {
  const response = await fetch(`${baseUrl}${url}`, {
    method,
    headers: {
      origin: new URL(baseUrl).origin,
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body: body ? JSON.stringify(body) : null,
  });
  const cookie = response.headers
    .getSetCookie()
    .map((c) => c.split(';')[0]!)
    .filter((c) => !c.endsWith('='))
    .join('; ');
  return { status: response.status, json: await response.json().catch(() => undefined), cookie };
}

function expectStatus(what: string, response: { status: number; json: unknown }, status: number): void {
  if (response.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.json)}`);
  }
}

/**
 * Sets up the instance at `baseUrl` (which must still need its first-run setup) with `keyCount`
 * API keys and an SMTP adapter for 127.0.0.1:`smtpPort`.
 */
export async function setUpInstance(options: {
  baseUrl: string;
  setupToken: string;
  root: string;
  smtpPort: number;
  keyCount: number;
}): Promise<Instance> {
  const { baseUrl } = options;
  const setup = await call(
    baseUrl,
    'POST',
    '/api/auth/setup',
    {
      token: options.setupToken,
      name: 'Bench Owner',
      email: `bench-${randomBytes(4).toString('hex')}@example.test`,
      password: `pw-${randomBytes(12).toString('hex')}`,
      teamName: 'Bench',
    },
    {},
  );
  expectStatus('setup', setup, 201);
  const session = { cookie: setup.cookie };
  const post = async (url: string, body: object) => call(baseUrl, 'POST', url, body, session);

  let rateLimit = RATE_LIMITS[0]!;
  const keys: string[] = [];
  for (let i = 0; i < options.keyCount; i++) {
    let created = await post('/api/api-keys', { name: `bench ${i}`, rateLimit });
    while (created.status === 400 && rateLimit !== RATE_LIMITS.at(-1)) {
      rateLimit = RATE_LIMITS[RATE_LIMITS.indexOf(rateLimit) + 1]!;
      created = await post('/api/api-keys', { name: `bench ${i}`, rateLimit });
    }
    expectStatus('create API key', created, 201);
    keys.push(created.json.data.key as string);
  }
  const adapter = await post('/api/adapters', {
    name: 'Sink',
    type: 'smtp',
    config: { host: '127.0.0.1', port: options.smtpPort, secure: false },
    defaultFrom: 'Bench <bench@postwright.test>',
  });
  expectStatus('create adapter', adapter, 201);
  const template = await post('/api/templates', {
    name: 'Welcome',
    subject: 'Welcome, {{ first_name }}',
    designJson: welcomeDesign(options.root),
  });
  expectStatus('create template', template, 201);
  return {
    keys,
    rateLimit,
    templateId: template.json.data.id as string,
    adapterId: adapter.json.data.id as string,
    teamId: (setup.json.data.team as { id: string }).id,
    cookie: setup.cookie,
  };
}

/** Emails of the instance: `total` and a count per status (`GET /api/logs/stats` as the owner). */
export async function statusCounts(baseUrl: string, cookie: string): Promise<Record<string, number>> {
  const response = await call(baseUrl, 'GET', '/api/logs/stats', undefined, { cookie });
  expectStatus('log stats', response, 200);
  return response.json.data as Record<string, number>;
}
