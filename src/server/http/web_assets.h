// The dashboard's static files (web/), embedded in the binary at build time by
// cmake/embed_files.cmake, so the daemon reads nothing from disk to serve them.
#pragma once

#include <span>
#include <string_view>

namespace baton::server {

struct WebAsset {
  std::string_view path;          // the URL path ("/", "/ui/app.js")
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

// Every embedded file, in no particular order. Static storage: the views never dangle.
std::span<const WebAsset> WebAssets();

}  // namespace baton::server
