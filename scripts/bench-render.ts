/**
 * Rendering benchmark: for each sample EmailBuilder.js document, adds Liquid to its first Text
 * block and its subject, then for ~2 s each (BENCH_SECONDS overrides) measures
 *   - render:          renders/s of a template compiled once (the send path with a cacheKey),
 *   - compile+render:  renders/s when every call compiles (no cacheKey),
 * and prints one row per document with the mean time per render in ms.
 *
 * Run: npm run bench:render   (documents from EMAILBUILDER_FIXTURES or server/test/fixtures/emailbuilder)
 */
import {
  compileTemplate,
  type RenderedEmail,
  renderTemplate,
} from '../server/src/modules/rendering/index.ts';
import { firstTextBlockId, loadFixtures } from '../server/src/modules/rendering/rendering.factories.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const SUBJECT = 'Hello {{ first_name | default: "there" }}, your order {{ order.number }}';
const VARIABLES = {
  first_name: 'Ada',
  order: { number: 'A-1042', items: [{ title: 'Pen', qty: 5 }] },
};

/** Calls `fn` for about `seconds`; returns calls per second and mean ms per call. */
async function measure(
  seconds: number,
  fn: () => Promise<RenderedEmail>,
): Promise<{ perSecond: number; meanMs: number }> {
  for (let i = 0; i < 20; i++) await fn(); // warm-up: JIT and lazy imports
  let count = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  while (performance.now() < until) {
    await fn();
    count++;
  }
  const elapsed = performance.now() - started;
  return { perSecond: (count * 1000) / elapsed, meanMs: elapsed / count };
}

function row(cells: (string | number)[]): string {
  return cells.map((cell, i) => (i === 0 ? String(cell).padEnd(28) : String(cell).padStart(18))).join('');
}

async function main(): Promise<void> {
  const fixtures = loadFixtures();
  if (fixtures.length === 0) throw new Error('No sample documents found (set EMAILBUILDER_FIXTURES)');
  console.log(`node ${process.version}, ${SECONDS} s per measurement`);
  console.log(row(['document', 'html bytes', 'render/s', 'ms/render', 'compile+render/s', 'ms/compile+rnd']));
  for (const { name, design } of fixtures) {
    const textId = firstTextBlockId(design);
    const props = design[textId]!.data.props!;
    props.text = `Dear {{ first_name }}, {% for item in order.items %}{{ item.qty }} × {{ item.title }} {% endfor %}${props.text}`;
    const input = { subject: SUBJECT, designJson: design };

    const compiled = compileTemplate(input);
    const sample = await compiled.render(VARIABLES);
    if (!sample.text.includes('Dear Ada')) throw new Error(`${name}: variables did not render`);
    const cached = await measure(SECONDS, () => compiled.render(VARIABLES));
    const uncached = await measure(SECONDS, () => renderTemplate(input, VARIABLES));
    console.log(
      row([
        name,
        sample.html.length,
        cached.perSecond.toFixed(0),
        cached.meanMs.toFixed(3),
        uncached.perSecond.toFixed(0),
        uncached.meanMs.toFixed(3),
      ]),
    );
  }
}

await main();
