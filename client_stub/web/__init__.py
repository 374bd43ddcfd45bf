"""The browser client (vtt-sync-client.js) and the tracker page, shipped as
package data: the server serves these files by exact name."""
