/**
 * The admin page's script (src/admin/, compiled by tsc into lib/admin/) as one file, where
 * the server inlines it into the page (jupyter_elastic_gpu/server/admin_page.py): one
 * document, no other route to authenticate.
 */
const path = require('path');

module.exports = {
  entry: './lib/admin/index.js',
  output: {
    path: path.resolve(__dirname, '../jupyter_elastic_gpu/server/static/admin'),
    filename: 'admin.js'
  },
  // Inlined into the page: no eval and no source map comment pointing at a file not served.
  devtool: false,
  performance: { hints: false }
};
