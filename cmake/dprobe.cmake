# Helpers shared by the layer CMakeLists.

# Layers, lowest first (Documentation/design.md, "Layers"): tools -> tracefs -> {fprobe,
# kprobe} -> core -> arch. Sources include each other as "<layer>/file.h" from the top of the
# tree; a layer is compiled with an include root that holds only itself and the layers below
# it (${CMAKE_BINARY_DIR}/layers/<name>/<layer> -> <source>/<layer>), so including a header of
# a layer above or beside fails to compile. include/ (the public C API) is open to all.
set(DPROBE_LAYER_DIR_arch arch)
set(DPROBE_LAYER_DIR_core core)
set(DPROBE_LAYER_DIR_fprobe fprobe)
set(DPROBE_LAYER_DIR_kprobe kprobe)
set(DPROBE_LAYER_DIR_tracefs tracefs)
set(DPROBE_LAYER_DIR_tools tools)
set(DPROBE_LAYER_BELOW_arch)
set(DPROBE_LAYER_BELOW_core arch)
set(DPROBE_LAYER_BELOW_fprobe core)
set(DPROBE_LAYER_BELOW_kprobe core)
set(DPROBE_LAYER_BELOW_tracefs fprobe kprobe)
set(DPROBE_LAYER_BELOW_tools tracefs)

# dprobe_layer_closure(OUT LAYER): LAYER and every layer below it.
function(dprobe_layer_closure out layer)
  set(all ${layer})
  foreach(b ${DPROBE_LAYER_BELOW_${layer}})
    dprobe_layer_closure(sub ${b})
    list(APPEND all ${sub})
  endforeach()
  list(REMOVE_DUPLICATES all)
  set(${out} ${all} PARENT_SCOPE)
endfunction()

# dprobe_layer_root(OUT LAYER): the include root of LAYER (made at configure time).
function(dprobe_layer_root out layer)
  set(root ${CMAKE_BINARY_DIR}/layers/${layer})
  dprobe_layer_closure(seen ${layer})
  file(MAKE_DIRECTORY ${root})
  foreach(l ${seen})
    set(d ${DPROBE_LAYER_DIR_${l}})
    if(NOT EXISTS ${root}/${d})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${d} ${root}/${d} SYMBOLIC)
    endif()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# dprobe_layer(NAME LAYER): an OBJECT library from every .cpp/.c/.S in the current directory
# (non-recursive, plus one level of subdirectories), built PIC with hidden visibility, that
# links the layer(s) right below it (their include roots and libraries come with them) and
# sees only its own include root.
function(dprobe_layer name layer)
  file(GLOB srcs CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*.c ${CMAKE_CURRENT_SOURCE_DIR}/*.S
    ${CMAKE_CURRENT_SOURCE_DIR}/*/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*/*.c ${CMAKE_CURRENT_SOURCE_DIR}/*/*.S)
  if(NOT srcs)
    # A layer whose files have not landed yet still yields an (empty) object library.
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty.c)
  endif()
  add_library(${name} OBJECT ${srcs})
  dprobe_layer_root(root ${layer})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${root})
  foreach(b ${DPROBE_LAYER_BELOW_${layer}})
    target_link_libraries(${name} PUBLIC dprobe_${b})
  endforeach()
  target_compile_options(${name} PRIVATE -fvisibility=hidden $<$<COMPILE_LANGUAGE:CXX>:-fvisibility-inlines-hidden>
)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# Flavours in which test programs are built: patch sites from -pg -mfentry, from
# -fpatchable-function-entry=5, and none at all (plain).
set(DPROBE_FLAVOUR_fentry -pg -mfentry)
set(DPROBE_FLAVOUR_pfe -fpatchable-function-entry=5)
set(DPROBE_FLAVOUR_plain)
