// What the Node drivers of the browser's searches share: loading a module of the page, and
// the uint32 hash their synthetic games are made of (the Python tests compute the same).

import { readFile } from "node:fs/promises";

/** A module of the page (azjax/apps/static/NAME), imported as an ES module. */
export async function importStatic(name) {
  const url = new URL(`../../azjax/apps/static/${name}`, import.meta.url);
  try {
    return await import(url);
  } catch (error) {
    // A Node older than 20.19 reads a .js file outside a "type": "module" package as CommonJS.
    if (!(error instanceof SyntaxError)) throw error;
    const source = await readFile(url, "utf8");
    return import(`data:text/javascript,${encodeURIComponent(source)}`);
  }
}

const imul = Math.imul;

/** lowbias32: a uint32 -> uint32 hash. */
export function mix(x) {
  x = (x ^ (x >>> 16)) >>> 0;
  x = imul(x, 0x7feb352d) >>> 0;
  x = (x ^ (x >>> 15)) >>> 0;
  x = imul(x, 0x846ca68b) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

/** A uint32 drawn from state `h` for `salt`. */
export const rand = (h, salt) => mix((h + imul(salt, 0x85ebca6b)) >>> 0);

/** The legal actions (Uint8Array [numActions]) of state `h`: each illegal with a chance of
 * (`rand(h, 99) % levels`) eighths, one of them always legal. */
export function drawLegal(h, numActions, levels) {
  const threshold = rand(h, 99) % levels;
  const alwaysLegal = rand(h, 98) % numActions;
  const legal = (a) => rand(h, 100 + a) % 8 >= threshold || a === alwaysLegal;
  return Uint8Array.from({ length: numActions }, (_, a) => (legal(a) ? 1 : 0));
}

/** The prior logit of action `a` in state `h`: k / 512 in [-4, 4), exact in float32. */
export const drawLogit = (h, a) => ((rand(h, 1 + a) >>> 20) - 2048) / 512;

/** Reads the driver's JSON input from stdin. */
export async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}
