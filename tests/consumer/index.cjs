// The same from CommonJS.
const { version, traceMlp } = require("ipu-playground");

module.exports = { version, traceMlp };
