/** The HTML page the API serves (/docs, /console): one skeleton, the page's own head and body lines. */
export function htmlPage({ title, head, body }: { title: string; head: readonly string[]; body: readonly string[] }): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${title}</title>`,
    // An empty icon: the browser does not go asking for /favicon.ico.
    '<link rel="icon" href="data:,">',
    ...head,
    '</head>',
    '<body>',
    ...body,
    '</body>',
    '</html>',
  ].join('\n');
}
