import type { Browser } from 'puppeteer-core';

/** How long a killed browser process is waited for to exit (ms). */
const EXIT_WAIT_MS = 2_000;

/**
 * Whether the browser process answers a DevTools call within `ms`: `Browser.getVersion` over a
 * session attached to the browser target, which the browser process answers itself, whatever its
 * pages' renderers are doing (measured: 2-31 ms, 31 with one page spinning in an endless script;
 * never with the browser stopped by SIGSTOP). Not `browser.version()`: puppeteer answers that from
 * a cache after its first call. An error is an answer too (the browser is there to give it).
 * @returns false only when nothing came within `ms`. Never throws.
 */
export async function browserAnswers(browser: Browser, ms: number): Promise<boolean> {
  const probe = (async () => {
    const session = await browser.target().createCDPSession();
    try {
      await session.send('Browser.getVersion');
    } finally {
      session.detach().catch(() => {});
    }
  })().then(
    () => true,
    () => true,
  );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([probe, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * SIGKILL to the browser's whole process group, then a wait of at most 2 s for the browser process
 * to exit. puppeteer launches Chromium as the leader of its own process group (`detached`) and
 * kills that group itself (`Process.kill` of @puppeteer/browsers): the browser process alone would
 * leave its zygotes, renderers and utility processes behind when they are stopped (measured: with
 * the group stopped by SIGSTOP and the browser killed, 7 stayed stopped until resumed). A stopped
 * process dies of SIGKILL too. Never throws; nothing to do when the browser has already exited.
 */
export async function killBrowser(browser: Browser): Promise<void> {
  const child = browser.process();
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
  await Promise.race([exited, new Promise<void>((resolve) => setTimeout(resolve, EXIT_WAIT_MS).unref())]);
}

/**
 * `browser.close()`, or, when it has not ended within `ms`, {@link killBrowser}. Never throws.
 */
export async function closeOrKill(browser: Browser, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const closed = browser.close().then(
    () => true,
    () => true,
  );
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const inTime = await Promise.race([closed, timedOut]);
  clearTimeout(timer);
  if (!inTime) await killBrowser(browser);
}
