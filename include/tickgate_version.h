/*
 * tickgate_version.h — the version of Tickgate: the one place its numbers
 * are written. tickgate.h includes it; CMakeLists.txt reads the numbers from
 * it, and so does the Python package's build (bindings/python/pyproject.toml).
 * The test build.version checks that every other place agrees.
 */
#ifndef TICKGATE_VERSION_H
#define TICKGATE_VERSION_H

#define TG_VERSION_MAJOR 0
#define TG_VERSION_MINOR 2
#define TG_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of this header. */
#define TG_VERSION_STRINGIFY_(x) #x
#define TG_VERSION_STRINGIFY(x) TG_VERSION_STRINGIFY_(x)
#define TG_VERSION_STRING                                                  \
    TG_VERSION_STRINGIFY(TG_VERSION_MAJOR) "."                             \
    TG_VERSION_STRINGIFY(TG_VERSION_MINOR) "."                             \
    TG_VERSION_STRINGIFY(TG_VERSION_PATCH)
/* (MAJOR << 16) | (MINOR << 8) | PATCH of this header. */
#define TG_VERSION_HEX \
    ((TG_VERSION_MAJOR << 16) | (TG_VERSION_MINOR << 8) | TG_VERSION_PATCH)

#endif /* TICKGATE_VERSION_H */
