import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Local fakes of the five hosted email APIs (issue #10 "Done means"): each a node:http server on
 * 127.0.0.1 that speaks its provider's documented HTTP API (paths, auth header, request format,
 * response and error bodies), records every request, and can be told to fail the next sends. The
 * providers reach them through the PROVIDER_ENDPOINT_* overrides.
 */

export type FakeKind = 'resend' | 'sendgrid' | 'mailgun' | 'ses' | 'postmark';

/** One request the fake received. */
export interface RecordedRequest {
  method: string;
  /** Path with query string. */
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  /** The body parsed as JSON, when it is JSON. */
  json?: any;
  /** The body parsed as multipart/form-data or urlencoded, when it is. */
  form?: FormData;
  /** The client's port: the same for requests over one kept-alive connection. */
  remotePort: number | undefined;
}

/** A failure the fake answers the next send with: HTTP status and the provider's error message. */
export interface FakeFailure {
  status: number;
  message: string;
  /** Answer this HTML body instead of the provider's JSON error (a proxy's or load balancer's page). */
  html?: string;
}

export interface FakeProvider {
  kind: FakeKind;
  /** Base URL for PROVIDER_ENDPOINT_*. */
  url: string;
  /** Every request, in order. */
  requests: RecordedRequest[];
  /** The send requests only. */
  sends(): RecordedRequest[];
  /** Answers the next sends with these failures, one each, before succeeding again. */
  failNextSends(...failures: FakeFailure[]): void;
  /** Holds the answers to the next sends, one delay (ms) each, like a provider slow to answer. */
  delayNextSends(...delaysMs: number[]): void;
  close(): Promise<void>;
}

/** Credentials the fakes accept; anything else is refused as the provider refuses it. */
export const FAKE_CREDENTIALS = {
  resend: { apiKey: 're_good_key' },
  sendgrid: { apiKey: 'SG.good-key' },
  mailgun: { apiKey: 'key-good', domain: 'mg.example.test' },
  ses: { accessKeyId: 'AKIAGOODKEY', secretAccessKey: 'good-secret', region: 'eu-west-1' },
  postmark: { serverToken: 'good-server-token' },
} as const;

/** A Resend API key with "sending access" only: it sends, but cannot list domains. */
export const RESEND_RESTRICTED_KEY = 're_sending_only';

/** The adapter type of each fake. */
export const FAKE_ADAPTER_TYPES: Record<FakeKind, string> = {
  resend: 'mailapi_a',
  sendgrid: 'mailapi_b',
  mailgun: 'mailapi_domain',
  ses: 'mailapi_cloud',
  postmark: 'mailapi_server',
};

/** The env variable that points the app at each fake. */
export const FAKE_ENDPOINT_VARIABLES: Record<FakeKind, string> = {
  resend: 'PROVIDER_ENDPOINT_RESEND',
  sendgrid: 'PROVIDER_ENDPOINT_SENDGRID',
  mailgun: 'PROVIDER_ENDPOINT_MAILGUN',
  ses: 'PROVIDER_ENDPOINT_SES',
  postmark: 'PROVIDER_ENDPOINT_POSTMARK',
};

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

interface Behaviour {
  /** True when the request carries the good credentials. */
  authorized(request: RecordedRequest): boolean;
  /** The provider's answer to bad credentials. */
  unauthorized: Reply;
  /** A different answer for some refused requests (Resend's restricted keys). */
  restricted?: (request: RecordedRequest) => Reply | undefined;
  isSend(request: RecordedRequest): boolean;
  /** The answer to a good send (n = how many sends so far). */
  sent(request: RecordedRequest, n: number): Reply;
  /** The answer to the verify read; undefined = 404. */
  read(request: RecordedRequest): Reply | undefined;
  /** The provider's error body for a failure. */
  failure(failure: FakeFailure): Reply;
}

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

const BEHAVIOURS: Record<FakeKind, Behaviour> = {
  // https://resend.com/docs/api-reference/introduction (errors: {statusCode, message, name})
  resend: {
    // A "sending access" key (RESEND_RESTRICTED_KEY) may send but gets 401 restricted_api_key elsewhere.
    authorized: (r) =>
      r.headers.authorization === `Bearer ${FAKE_CREDENTIALS.resend.apiKey}` ||
      (r.headers.authorization === `Bearer ${RESEND_RESTRICTED_KEY}` && r.path === '/emails'),
    unauthorized: {
      status: 401,
      body: { statusCode: 401, message: 'API key is invalid', name: 'validation_error' },
    },
    restricted: (r) =>
      r.headers.authorization === `Bearer ${RESEND_RESTRICTED_KEY}`
        ? {
            status: 401,
            body: {
              statusCode: 401,
              message: 'This API key is restricted to only send emails',
              name: 'restricted_api_key',
            },
          }
        : undefined,
    isSend: (r) => r.method === 'POST' && r.path === '/emails',
    sent: (_r, n) => ({ status: 200, body: { id: `49a3999c-0ce1-4ea6-ab68-afcd6dc2e79${n}` } }),
    read: (r) =>
      r.method === 'GET' && r.path.startsWith('/domains')
        ? { status: 200, body: { object: 'list', has_more: false, data: [] } }
        : undefined,
    failure: (f) => ({
      status: f.status,
      body: {
        statusCode: f.status,
        message: f.message,
        name: f.status >= 500 ? 'internal_server_error' : 'validation_error',
      },
    }),
  },
  // https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send (errors: {errors: [{message}]})
  sendgrid: {
    authorized: (r) => r.headers.authorization === `Bearer ${FAKE_CREDENTIALS.sendgrid.apiKey}`,
    unauthorized: {
      status: 401,
      body: {
        errors: [
          {
            message: 'The provided authorization grant is invalid, expired, or revoked',
            field: null,
            help: null,
          },
        ],
      },
    },
    isSend: (r) => r.method === 'POST' && r.path === '/v3/mail/send',
    sent: (_r, n) => ({ status: 202, body: '', headers: { 'x-message-id': `sg-message-${n}` } }),
    read: (r) =>
      r.method === 'GET' && r.path === '/v3/scopes'
        ? { status: 200, body: { scopes: ['mail.send'] } }
        : undefined,
    failure: (f) => ({
      status: f.status,
      body: { errors: [{ message: f.message, field: null, help: null }] },
    }),
  },
  // https://documentation.mailgun.com/docs/mailgun/api-reference/ (errors: {message}; 401 "Forbidden")
  mailgun: {
    authorized: (r) => r.headers.authorization === basic('api', FAKE_CREDENTIALS.mailgun.apiKey),
    unauthorized: { status: 401, body: 'Forbidden' },
    isSend: (r) => r.method === 'POST' && r.path === `/v3/${FAKE_CREDENTIALS.mailgun.domain}/messages`,
    sent: (_r, n) => ({
      status: 200,
      body: { id: `<20261123.${n}@${FAKE_CREDENTIALS.mailgun.domain}>`, message: 'Queued. Thank you.' },
    }),
    read: (r) =>
      r.method === 'GET' && r.path.startsWith(`/v4/domains/${FAKE_CREDENTIALS.mailgun.domain}`)
        ? {
            status: 200,
            body: {
              domain: {
                name: FAKE_CREDENTIALS.mailgun.domain,
                state: 'active',
                created_at: 'Mon, 23 Nov 2026 10:00:00 GMT',
              },
              receiving_dns_records: [],
              sending_dns_records: [],
            },
          }
        : undefined,
    failure: (f) => ({ status: f.status, body: { message: f.message } }),
  },
  // https://docs.aws.amazon.com/ses/latest/APIReference-V2/ (errors: {message} + X-Amzn-ErrorType)
  ses: {
    authorized: (r) =>
      (r.headers.authorization ?? '').startsWith(
        `AWS4-HMAC-SHA256 Credential=${FAKE_CREDENTIALS.ses.accessKeyId}/`,
      ) && (r.headers.authorization ?? '').includes(`/${FAKE_CREDENTIALS.ses.region}/ses/aws4_request`),
    unauthorized: {
      status: 403,
      body: { message: 'The security token included in the request is invalid.' },
      headers: { 'x-amzn-errortype': 'UnrecognizedClientException' },
    },
    isSend: (r) => r.method === 'POST' && r.path === '/v2/email/outbound-emails',
    sent: (_r, n) => ({ status: 200, body: { MessageId: `0102018f-ses-message-${n}` } }),
    read: (r) =>
      r.method === 'GET' && r.path === '/v2/email/account'
        ? { status: 200, body: { SendingEnabled: true, ProductionAccessEnabled: true } }
        : undefined,
    failure: (f) => ({
      status: f.status,
      body: { message: f.message },
      headers: { 'x-amzn-errortype': f.status >= 500 ? 'InternalFailure' : 'MessageRejected' },
    }),
  },
  // https://postmarkapp.com/developer/api/overview (errors: {ErrorCode, Message})
  postmark: {
    authorized: (r) => r.headers['x-postmark-server-token'] === FAKE_CREDENTIALS.postmark.serverToken,
    unauthorized: {
      status: 401,
      body: {
        ErrorCode: 10,
        Message: 'The Server Token you provided in the X-Postmark-Server-Token request header was invalid.',
      },
    },
    isSend: (r) => r.method === 'POST' && r.path === '/email',
    sent: (r, n) => ({
      status: 200,
      body: {
        To: r.json?.To,
        SubmittedAt: '2026-11-23T14:00:00.0000000Z',
        MessageID: `b7bc2f4a-e38e-4336-af7d-e6c39231400${n}`,
        ErrorCode: 0,
        Message: 'OK',
      },
    }),
    read: (r) =>
      r.method === 'GET' && r.path === '/server'
        ? { status: 200, body: { ID: 1, Name: 'Fake server' } }
        : undefined,
    failure: (f) => ({
      status: f.status,
      body: { ErrorCode: f.status >= 500 ? 0 : 300, Message: f.message },
    }),
  },
};

/** Reads a request body and parses it as JSON or form data when its content type says so. */
async function record(request: IncomingMessage): Promise<RecordedRequest> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  const recorded: RecordedRequest = {
    method: request.method ?? 'GET',
    path: request.url ?? '/',
    headers: request.headers,
    body,
    remotePort: request.socket.remotePort,
  };
  const type = request.headers['content-type'] ?? '';
  if (body.length && type.includes('json')) recorded.json = JSON.parse(body.toString('utf8'));
  if (
    body.length &&
    (type.startsWith('multipart/form-data') || type.startsWith('application/x-www-form-urlencoded'))
  ) {
    recorded.form = await new Response(body, { headers: { 'content-type': type } }).formData();
  }
  return recorded;
}

function reply(response: ServerResponse, answer: Reply): void {
  const text = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
  response.writeHead(answer.status, {
    'content-type': typeof answer.body === 'string' ? 'text/plain' : 'application/json',
    ...answer.headers,
  });
  response.end(text);
}

/** Starts the fake of `kind` on 127.0.0.1 (a free port). */
export async function startFakeProvider(kind: FakeKind): Promise<FakeProvider> {
  const behaviour = BEHAVIOURS[kind];
  const requests: RecordedRequest[] = [];
  const failures: FakeFailure[] = [];
  const delays: number[] = [];
  let sent = 0;
  const server = createServer((request, response) => {
    record(request).then(
      (recorded) => {
        requests.push(recorded);
        if (!behaviour.authorized(recorded)) {
          return reply(response, behaviour.restricted?.(recorded) ?? behaviour.unauthorized);
        }
        if (behaviour.isSend(recorded)) {
          const answer = () => {
            const failure = failures.shift();
            if (failure?.html !== undefined) {
              return reply(response, {
                status: failure.status,
                body: failure.html,
                headers: { 'content-type': 'text/html' },
              });
            }
            if (failure) return reply(response, behaviour.failure(failure));
            sent += 1;
            return reply(response, behaviour.sent(recorded, sent));
          };
          const delay = delays.shift();
          if (delay) return void setTimeout(answer, delay);
          return answer();
        }
        const read = behaviour.read(recorded);
        return reply(response, read ?? behaviour.failure({ status: 404, message: 'Not found' }));
      },
      () => reply(response, { status: 400, body: 'unreadable request' }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    kind,
    url: `http://127.0.0.1:${port}`,
    requests,
    sends: () => requests.filter((r) => behaviour.isSend(r)),
    failNextSends: (...next) => failures.push(...next),
    delayNextSends: (...next) => delays.push(...next),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
