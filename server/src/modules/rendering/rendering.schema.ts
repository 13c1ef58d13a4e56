/**
 * Our zod 4 schema of an EmailBuilder.js document (`@usewaypoint/email-builder` 0.0.9).
 *
 * It mirrors the block schemas shipped in node_modules/@usewaypoint/block-* and
 * email-builder's Reader: strict on the types of every known key (a colour is `#rrggbb`,
 * a size is a number), lenient on keys it does not know (kept as they are; the renderer
 * ignores them). Links between blocks (`childrenIds`) are checked in rendering.design.ts.
 */
import { z } from 'zod';

const color = z
  .string()
  .regex(/^#[0-9a-fA-F]{6}$/, 'Expected a colour like #1a2b3c')
  .nullish();
const fontFamily = z
  .enum([
    'MODERN_SANS',
    'BOOK_SANS',
    'ORGANIC_SANS',
    'GEOMETRIC_SANS',
    'HEAVY_SANS',
    'ROUNDED_SANS',
    'MODERN_SERIF',
    'BOOK_SERIF',
    'MONOSPACE',
  ])
  .nullish();
const padding = z
  .object({ top: z.number(), bottom: z.number(), right: z.number(), left: z.number() })
  .nullish();
const textAlign = z.enum(['left', 'center', 'right']).nullish();
const fontWeight = z.enum(['bold', 'normal']).nullish();
const nonNegative = z.number().min(0).nullish();
const text = z.string().nullish();
const childrenIds = z.array(z.string());

/** A block's `data`: `{style, props}`, both optional, unknown keys kept. */
function blockData<S extends z.core.$ZodLooseShape, P extends z.core.$ZodLooseShape>(style: S, props: P) {
  return z.looseObject({ style: z.looseObject(style).nullish(), props: z.looseObject(props).nullish() });
}

const emailLayoutData = z.looseObject({
  backdropColor: color,
  borderColor: color,
  borderRadius: z.number().nullish(),
  canvasColor: color,
  textColor: color,
  fontFamily,
  childrenIds: childrenIds.nullish(),
});

const textStyle = {
  color,
  backgroundColor: color,
  fontSize: nonNegative,
  fontFamily,
  fontWeight,
  textAlign,
  padding,
};

/** `data` schema of every block type the renderer knows, by type name. */
export const BLOCK_DATA_SCHEMAS = {
  EmailLayout: emailLayoutData,
  Text: blockData(textStyle, { markdown: z.boolean().nullish(), text }),
  Heading: blockData(
    { color, backgroundColor: color, fontFamily, fontWeight, textAlign, padding },
    { text, level: z.enum(['h1', 'h2', 'h3']).nullish() },
  ),
  Button: blockData(
    { backgroundColor: color, fontSize: nonNegative, fontFamily, fontWeight, textAlign, padding },
    {
      buttonBackgroundColor: color,
      buttonStyle: z.enum(['rectangle', 'pill', 'rounded']).nullish(),
      buttonTextColor: color,
      fullWidth: z.boolean().nullish(),
      size: z.enum(['x-small', 'small', 'large', 'medium']).nullish(),
      text,
      url: text,
    },
  ),
  Image: blockData(
    { padding, backgroundColor: color, textAlign },
    {
      width: z.number().nullish(),
      height: z.number().nullish(),
      url: text,
      alt: text,
      linkHref: text,
      contentAlignment: z.enum(['top', 'middle', 'bottom']).nullish(),
    },
  ),
  Avatar: blockData(
    { textAlign, padding },
    {
      size: nonNegative,
      shape: z.enum(['circle', 'square', 'rounded']).nullish(),
      imageUrl: text,
      alt: text,
    },
  ),
  Divider: blockData({ backgroundColor: color, padding }, { lineColor: color, lineHeight: nonNegative }),
  Spacer: blockData({}, { height: nonNegative }),
  Html: blockData(textStyle, { contents: text }),
  Container: blockData(
    { backgroundColor: color, borderColor: color, borderRadius: z.number().nullish(), padding },
    { childrenIds: childrenIds.nullish() },
  ),
  ColumnsContainer: blockData(
    { backgroundColor: color, padding },
    {
      fixedWidths: z.array(z.number().nullish()).max(3).nullish(),
      columnsCount: z.union([z.literal(2), z.literal(3)]).nullish(),
      columnsGap: nonNegative,
      contentAlignment: z.enum(['top', 'middle', 'bottom']).nullish(),
      columns: z.array(z.looseObject({ childrenIds })).max(3).nullish(),
    },
  ),
} as const;

export type BlockType = keyof typeof BLOCK_DATA_SCHEMAS;
export const BLOCK_TYPES = Object.keys(BLOCK_DATA_SCHEMAS) as BlockType[];

/** True when `value` names one of the EmailBuilder block types we render. */
export function isBlockType(value: unknown): value is BlockType {
  return typeof value === 'string' && Object.hasOwn(BLOCK_DATA_SCHEMAS, value);
}

type BlockOf<T extends BlockType> = { type: T; data: z.infer<(typeof BLOCK_DATA_SCHEMAS)[T]> };
export type EmailBlock = { [T in BlockType]: BlockOf<T> }[BlockType];
/** A validated EmailBuilder.js document, as returned by `parseDesign`. */
export type EmailDesign = Record<string, EmailBlock>;

/** A reference from a block to a child: the child's id and where it is written in the block. */
export interface ChildReference {
  id: string;
  /** Path inside the block, e.g. `data.props.columns.0.childrenIds.2`. */
  path: string;
}

/** References to a block's children in render order (all columns of a ColumnsContainer). */
export function childReferencesOf(block: EmailBlock): ChildReference[] {
  const list = (ids: string[] | null | undefined, path: string) =>
    (ids ?? []).map((id, index) => ({ id, path: `${path}.${index}` }));
  switch (block.type) {
    case 'EmailLayout':
      return list(block.data.childrenIds, 'data.childrenIds');
    case 'Container':
      return list(block.data.props?.childrenIds, 'data.props.childrenIds');
    case 'ColumnsContainer':
      return (block.data.props?.columns ?? []).flatMap((column, index) =>
        list(column.childrenIds, `data.props.columns.${index}.childrenIds`),
      );
    default:
      return [];
  }
}
