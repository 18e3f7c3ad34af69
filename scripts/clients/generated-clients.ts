// The typescript-fetch client that openapi-generator made from
// /openapi.json, against a running server: the listing's search, sort,
// count and fields, each answer checked. scripts/clients/generated-clients.sh
// copies this next to the generated client, compiles both with
// `tsc --strict` and runs it with node (its own fetch).
//
// Usage: node check.js BASE_URL TOKEN   (the store must be empty; it is
// left empty). The first failed check ends it with exit code 1.
import { Configuration, ListedPlant, PlantsApi, ResponseError } from './typescript-fetch/index';

declare const process: { argv: string[]; exitCode?: number };

// "FERN" matches 2 and 3 by name and 4 by its tag, in any case; by name,
// descending, they come 3, 4, 2 (names compare by bytes).
const SEED: [number, string, string | undefined][] = [
  [1, 'Monstera deliciosa', 'tropical'],
  [2, 'Boston fern', 'shade'],
  [3, 'fern, maidenhair', undefined],
  [4, 'Staghorn', 'Fernlike'],
];

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`clients: FAIL (typescript-fetch): ${what}`);
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
const ids = (plants: ListedPlant[]): (number | undefined)[] => plants.map((p) => p.id);

// The cursor in a `Link: <...>; rel="next"` header.
function afterOf(link: string | null): string {
  const url = new URL(/<([^>]*)>/.exec(link ?? '')?.[1] ?? '', 'http://unused');
  return url.searchParams.get('after') ?? '';
}

async function main(): Promise<void> {
  const [base, token] = process.argv.slice(2);
  const plants = new PlantsApi(new Configuration({ basePath: base, accessToken: token }));
  for (const [id, name, tag] of SEED) await plants.addPlant({ newPlant: { id, name, tag } });

  const first = await plants.listPlantsRaw({ q: 'FERN', sort: '-name', count: true, limit: 2 });
  const firstPage = await first.value();
  check(same(ids(firstPage), [3, 4]), `first page ${JSON.stringify(firstPage)}`);
  check(first.raw.headers.get('X-Total-Count') === '3', 'the total on the first page');
  const after = afterOf(first.raw.headers.get('Link'));
  check(after.startsWith('-name:4:='), `cursor ${after}`);
  const rest = await plants.listPlantsRaw({ q: 'FERN', sort: '-name', count: true, limit: 2, after });
  check(same(ids(await rest.value()), [2]), 'second page');
  check(rest.raw.headers.get('X-Total-Count') === '3' && !rest.raw.headers.has('Link'), 'last page');

  const byId = await plants.listPlants({ sort: '-id', fields: 'id,name' });
  const want = SEED.slice().reverse().map(([id, name]) => ({ id, name }));
  check(same(byId.map((p) => ({ id: p.id, name: p.name })), want), `sort=-id ${JSON.stringify(byId)}`);
  check(byId.every((p) => p.tag === undefined), 'fields=id,name sent a tag');
  const named = await plants.listPlants({ sort: 'name', fields: 'name' });
  check(named.every((p) => p.id === undefined), 'fields=name sent an id');
  const wantNames = ['Boston fern', 'Monstera deliciosa', 'Staghorn', 'fern, maidenhair'];
  check(same(named.map((p) => p.name), wantNames), `sort=name ${JSON.stringify(named)}`);
  const uncounted = await plants.listPlantsRaw({});
  check(!uncounted.raw.headers.has('X-Total-Count'), 'counted unasked');
  try {
    await plants.listPlants({ after: 'name:1:=Fern' }); // a cursor of another sort
    check(false, 'a name cursor in the id order was taken');
  } catch (e) {
    check(e instanceof ResponseError && e.response.status === 400, `${e}`);
  }
  for (const [id] of SEED) await plants.deletePlant({ id });
  console.log('clients: ok: the typescript-fetch client searched, sorted both ways, counted, paged and chose fields');
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
