// Playwright's settings for the example: Chromium driven through its
// executable path (CHROMIUM, else Debian's /usr/bin/chromium when present,
// else the browser that `npx playwright install chromium` downloads), a
// list of results, and a trace kept for each failed test in test-results/.
// The server itself is started by the tests (plantstore.js), one per
// worker, so that parallel workers never reset each other's plants.
'use strict';
const fs = require('node:fs');
const { defineConfig } = require('@playwright/test');

const debian = '/usr/bin/chromium';
const executablePath = process.env.CHROMIUM || (fs.existsSync(debian) ? debian : undefined);

module.exports = defineConfig({
  testDir: 'tests',
  timeout: 30_000,
  expect: { timeout: 5_000 },
  forbidOnly: !!process.env.CI,
  retries: 0,
  reporter: 'list',
  use: {
    browserName: 'chromium',
    launchOptions: { executablePath },
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
  },
});
