import { expect, test } from "bun:test";
import { testGateway } from "../support/storage.ts";

const gw = await testGateway();

test("login, upload to both back-ends with one Cid, list, ranged download, delete", async () => {
  const { client } = await gw.user();
  const bytes = new TextEncoder().encode("hello world\n");
  const a = await client.upload("dfs", bytes, { name: "hello.txt" });
  expect(a.Cid).toBe("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");
  const b = await client.upload("ipfs", bytes, { name: "hello.txt" });
  expect(b.Cid).toBe(a.Cid);
  const list = await client.list("dfs");
  expect(list.Object.map((f) => f.Name)).toEqual(["hello.txt"]);
  const res = await client.download("dfs", a.Cid, { range: [0, 4] });
  expect(res.status).toBe(206);
  expect(await res.text()).toBe("hello");
  expect(await client.delete(a.ID)).toEqual({ Status: "Success" });
  expect((await client.list("dfs")).Object).toEqual([]);
});
