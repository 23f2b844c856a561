// click.js URL [CHROMIUM]: open URL in Debian's chromium through
// playwright-core, click the button #go, print the text of #out. Run
// inside brig by tests/integration/test_browser.py: the page comes from a
// server on the host, reached through brig's proxy.
'use strict';
const { chromium } = require('playwright-core');

async function main() {
        const [url, executablePath = '/usr/bin/chromium'] = process.argv.slice(2);
        // Playwright's default chromiumSandbox: false passes --no-sandbox;
        // brig is the sandbox (docs/recipes.md).
        const browser = await chromium.launch({ executablePath, headless: true });
        try {
                const page = await browser.newPage();
                await page.goto(url);
                await page.click('#go');
                await page.waitForSelector('#out.done');
                console.log(await page.textContent('#out'));
        } finally {
                await browser.close();
        }
}

main().catch((e) => {
        console.error(`click.js: ${e.message}`);
        process.exit(1);
});
