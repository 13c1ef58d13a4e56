import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { sessionHeaders } from './auth.ts';

type Owner = { cookie: string };
type Design = Record<string, { type: string; data: Record<string, unknown> }>;

/** `server/test/fixtures/emailbuilder/` (real EmailBuilder.js documents, MIT; see its LICENSE). */
export const FIXTURES_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../fixtures/emailbuilder',
);

/** Names of the fixture documents (file names without `.json`). */
export function fixtureNames(): string[] {
  return readdirSync(FIXTURES_DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.replace(/\.json$/, ''))
    .sort();
}

export function loadFixture(name: string): Design {
  return JSON.parse(readFileSync(path.join(FIXTURES_DIR, `${name}.json`), 'utf8'));
}

/** Block ids in document order (depth-first from `root`, through containers and columns). */
export function blocksInOrder(design: Design): string[] {
  const order: string[] = [];
  const visit = (id: string) => {
    const block = design[id];
    if (!block) return;
    order.push(id);
    const data = block.data as {
      childrenIds?: string[];
      props?: { childrenIds?: string[]; columns?: { childrenIds: string[] }[] };
    };
    const children = [
      ...(data.childrenIds ?? []),
      ...(data.props?.childrenIds ?? []),
      ...(data.props?.columns ?? []).flatMap((c) => c.childrenIds),
    ];
    for (const child of children) visit(child);
  };
  visit('root');
  return order;
}

/** A copy of `design` whose first Text block (document order) starts with `prefix`. */
export function prependToFirstText(design: Design, prefix: string): Design {
  const copy = structuredClone(design);
  const id = blocksInOrder(copy).find((blockId) => copy[blockId]?.type === 'Text');
  if (!id) throw new Error('fixture has no Text block');
  const props = copy[id]!.data.props as { text: string };
  props.text = `${prefix}${props.text}`;
  return copy;
}

/** A minimal valid design: one Text block saying `text`. */
export function simpleDesign(text = 'Hello {{ first_name }}'): Design {
  return {
    root: {
      type: 'EmailLayout',
      data: {
        backdropColor: '#F5F5F5',
        canvasColor: '#FFFFFF',
        textColor: '#262626',
        fontFamily: 'MODERN_SANS',
        childrenIds: ['b1'],
      },
    },
    b1: {
      type: 'Text',
      data: { style: { padding: { top: 16, bottom: 16, left: 24, right: 24 } }, props: { text } },
    },
  };
}

async function created(response: { statusCode: number; body: string; json: () => any }, what: string) {
  expect(response.statusCode, `${what}: ${response.body}`).toBe(201);
  return response.json().data;
}

/** POST /api/api-keys; returns the created key (with its one-time `key` secret). */
export async function buildApiKey(app: FastifyInstance, owner: Owner, body: Record<string, unknown> = {}) {
  const response = await app.inject({
    method: 'POST',
    url: '/api/api-keys',
    headers: sessionHeaders(app, owner),
    payload: { name: 'Test key', ...body },
  });
  return created(response, 'create API key');
}

/** POST /api/adapters for an SMTP adapter pointing at 127.0.0.1:`port`. */
export async function buildSmtpAdapter(
  app: FastifyInstance,
  owner: Owner,
  port: number,
  body: Record<string, unknown> = {},
) {
  const response = await app.inject({
    method: 'POST',
    url: '/api/adapters',
    headers: sessionHeaders(app, owner),
    payload: {
      name: 'Local SMTP',
      type: 'smtp',
      config: { host: '127.0.0.1', port, secure: false },
      defaultFrom: 'Postwright Test <sender@postwright.test>',
      ...body,
    },
  });
  return created(response, 'create adapter');
}

/** POST /api/templates with a simple design unless `body` says otherwise. */
export async function buildTemplate(app: FastifyInstance, owner: Owner, body: Record<string, unknown> = {}) {
  const response = await app.inject({
    method: 'POST',
    url: '/api/templates',
    headers: sessionHeaders(app, owner),
    payload: { name: 'Welcome', subject: 'Hi {{ first_name }}', designJson: simpleDesign(), ...body },
  });
  return created(response, 'create template');
}

/** POST /api/v1/send with an API key secret. Returns the raw response. */
export function send(app: FastifyInstance, key: string, body: Record<string, unknown>) {
  return app.inject({ method: 'POST', url: '/api/v1/send', headers: { 'x-api-key': key }, payload: body });
}

/** GET /api/v1/:id/status with an API key secret; returns `data`. */
export async function emailStatus(app: FastifyInstance, key: string, id: string) {
  const response = await app.inject({
    method: 'GET',
    url: `/api/v1/${id}/status`,
    headers: { 'x-api-key': key },
  });
  expect(response.statusCode, response.body).toBe(200);
  return response.json().data as {
    id: string;
    status: string;
    sentAt: string | null;
    hasPdfAttachment: boolean;
  };
}

/** Asserts the spec's error envelope with `status` and `code`; returns `error`. */
export function expectError(
  response: { statusCode: number; body: string; json: () => any },
  status: number,
  code: string,
) {
  expect(response.statusCode, response.body).toBe(status);
  const body = response.json();
  expect(body).toMatchObject({ success: false, error: { code } });
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.details).toBe('object');
  return body.error as { code: string; message: string; details: Record<string, any> };
}

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** A dashboard request by `user` (session cookie + our Origin) with an optional JSON body. */
export function dashboardCall(
  app: FastifyInstance,
  user: { cookie: string },
  method: Method,
  url: string,
  payload?: object,
) {
  return app.inject({ method, url, headers: sessionHeaders(app, user), ...(payload ? { payload } : {}) });
}

/** Asserts a success envelope with `status` and returns its `data`. */
export async function dataOf(response: { statusCode: number; body: string; json: () => any }, status = 200) {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.json().success).toBe(true);
  return response.json().data;
}

/** GET /api/templates/:ref/versions as `user`; returns the versions (newest first). */
export async function templateVersionsOf(app: FastifyInstance, user: { cookie: string }, ref: string) {
  return dataOf(await dashboardCall(app, user, 'GET', `/api/templates/${ref}/versions`));
}

/** PUT /api/templates/:ref/versions/:versionId/restore as `user`; the raw response. */
export function restoreTemplateVersion(
  app: FastifyInstance,
  user: { cookie: string },
  ref: string,
  versionId: string,
) {
  return dashboardCall(app, user, 'PUT', `/api/templates/${ref}/versions/${versionId}/restore`);
}
