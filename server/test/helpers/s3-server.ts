import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  directory: string;
  silent: boolean;
  configureBuckets: { name: string }[];
}) => S3rverInstance;

// s3rver is CommonJS without type declarations.
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverConstructor;

/** A running S3-compatible server for tests and the settings that reach it. */
export interface TestS3Server {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** s3rver's fixed credentials (it verifies signatures against them). */
  accessKeyId: string;
  secretAccessKey: string;
  /** The environment that points Postwright's storage at this server. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * A real s3rver (S3-compatible, objects on disk) on 127.0.0.1 and a random port, in a new
 * temporary directory with one bucket; `close()` stops it and removes the directory.
 */
export async function startTestS3Server(bucket = 'postwright-test'): Promise<TestS3Server> {
  const directory = mkdtempSync(path.join(tmpdir(), 'postwright-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory,
    silent: true,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  return {
    endpoint,
    bucket,
    ...credentials,
    env: {
      STORAGE: 's3',
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_ACCESS_KEY_ID: credentials.accessKeyId,
      S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
