//! Define the `instantiate` function, which takes a byte array containing an
//! encoded wasm module and returns a live wasm instance. Also, define
//! `CompiledModule` to allow compiling and instantiating to be done as separate
//! steps.

use crate::code::EngineCode;
use crate::prelude::*;
use crate::profiling_agent::ProfilingAgent;
use crate::runtime::vm::CompiledModuleId;
use alloc::sync::Arc;
use core::ops::Range;
use core::str;
use wasmtime_environ::{
    CompiledFunctionsTable, CompiledModuleInfo, DefinedFuncIndex, FilePos, FuncIndex, FuncKey,
    FunctionLoc, FunctionName, Metadata, Module, ModuleInternedTypeIndex, StaticModuleIndex,
};

/// zundoko-operator patch (vendor/README.md): where a defined function's code and its
/// array-to-wasm trampoline lie in the text section. A `length` of 0 is "none", as in
/// `CompiledFunctionsTable` (a function that does not escape has no trampoline).
#[derive(Clone, Copy)]
struct DefinedFuncLocs {
    wasm: FunctionLoc,
    array_to_wasm: FunctionLoc,
}

/// A compiled wasm module, ready to be instantiated.
pub struct CompiledModule {
    /// A unique ID used to register this module with the engine.
    unique_id: CompiledModuleId,
    engine_code: Arc<EngineCode>,
    module: Arc<Module>,
    meta: Metadata,
    index: Arc<CompiledFunctionsTable>,
    /// Sorted list, by function index, of names we have for this module.
    func_names: Vec<FunctionName>,
    /// zundoko-operator patch (vendor/README.md): `index`'s locations of this module's defined
    /// functions and their array-to-wasm trampolines, by `DefinedFuncIndex`, looked up once
    /// here. Making a funcref needs both (`Instance::initialize_and_return_funcref`), and
    /// `index` finds them with binary searches over the whole image's namespaces and
    /// trampolines: an interpreter's startup code (CPython's) makes thousands of funcrefs in
    /// every new instance.
    defined_func_locs: Box<[DefinedFuncLocs]>,
}

impl CompiledModule {
    /// Creates `CompiledModule` directly from a precompiled artifact.
    ///
    /// The `engine_code` argument is expected to be an EngineCode
    /// wrapper around a CodeMemory containing the result of a
    /// previous call to `ObjectBuilder::finish` above. This is an ELF
    /// image, at this time, which contains all necessary information
    /// to create a `CompiledModule` from a compilation.
    ///
    /// This method also takes `info`, an optionally-provided deserialization
    /// of the artifacts' compilation metadata section. If this information is
    /// not provided then the information will be
    /// deserialized from the image of the compilation artifacts. Otherwise it
    /// will be assumed to be what would otherwise happen if the section were
    /// to be deserialized.
    ///
    /// The `profiler` argument here is used to inform JIT profiling runtimes
    /// about new code that is loaded.
    pub fn from_artifacts(
        engine_code: Arc<EngineCode>,
        info: CompiledModuleInfo,
        index: Arc<CompiledFunctionsTable>,
        profiler: &dyn ProfilingAgent,
    ) -> Result<Self> {
        let defined_func_locs = Self::defined_func_locs(&info.module, &index)?;
        let mut ret = Self {
            unique_id: CompiledModuleId::new(),
            engine_code,
            module: try_new::<Arc<_>>(info.module)?,
            meta: info.meta,
            index,
            func_names: info.func_names,
            defined_func_locs,
        };
        ret.register_profiling(profiler)?;

        Ok(ret)
    }

    /// zundoko-operator patch (vendor/README.md): the table `function_range` reads for
    /// `module`'s defined functions and trampolines, from `index`.
    fn defined_func_locs(
        module: &Module,
        index: &CompiledFunctionsTable,
    ) -> Result<Box<[DefinedFuncLocs]>> {
        let none = FunctionLoc {
            start: 0,
            length: 0,
        };
        let loc = |key| index.func_loc(key).copied().unwrap_or(none);
        Ok(module
            .defined_func_indices()
            .map(|i| DefinedFuncLocs {
                wasm: loc(FuncKey::DefinedWasmFunction(module.module_index, i)),
                array_to_wasm: loc(FuncKey::ArrayToWasmTrampoline(module.module_index, i)),
            })
            .try_collect::<Box<[_]>, OutOfMemory>()?)
    }

    fn register_profiling(&mut self, profiler: &dyn ProfilingAgent) -> Result<()> {
        // TODO-Bug?: "code_memory" is not exclusive for this module in the case of components,
        // so we may be registering the same code range multiple times here.

        profiler.register_module(self.engine_code.image(), &|addr| {
            let idx = self.func_by_text_offset(addr)?;
            let idx = self.module.func_index(idx);
            let name = self.func_name(idx)?;
            let mut demangled = String::new();
            wasmtime_environ::demangle_function_name(&mut demangled, name).unwrap();
            Some(demangled)
        });
        Ok(())
    }

    /// Get this module's unique ID. It is unique with respect to a
    /// single allocator (which is ordinarily held on a Wasm engine).
    pub fn unique_id(&self) -> CompiledModuleId {
        self.unique_id
    }

    /// Return a reference-counting pointer to a module.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    fn module_index(&self) -> StaticModuleIndex {
        self.module.module_index
    }

    /// Looks up the `name` section name for the function index `idx`, if one
    /// was specified in the original wasm module.
    pub fn func_name(&self, idx: FuncIndex) -> Option<&str> {
        // Find entry for `idx`, if present.
        let i = self.func_names.binary_search_by_key(&idx, |n| n.idx).ok()?;
        let name = &self.func_names[i];

        // Here we `unwrap` the `from_utf8` but this can theoretically be a
        // `from_utf8_unchecked` if we really wanted since this section is
        // guaranteed to only have valid utf-8 data. Until it's a problem it's
        // probably best to double-check this though.
        let data = self.engine_code.func_name_data();
        Some(str::from_utf8(&data[name.offset as usize..][..name.len as usize]).unwrap())
    }

    /// Returns an iterator over all functions defined within this module with
    /// their index and their offset in the underlying code image.
    #[inline]
    pub fn finished_function_ranges(
        &self,
    ) -> impl ExactSizeIterator<Item = (DefinedFuncIndex, Range<usize>)> + '_ {
        self.module.defined_func_indices().map(|i| {
            let key = FuncKey::DefinedWasmFunction(self.module_index(), i);
            (i, self.function_range(key))
        })
    }

    /// Returns the offset in the text section of the function that `key`
    /// points to.
    #[inline]
    pub fn function_range(&self, key: FuncKey) -> Range<usize> {
        // zundoko-operator patch (vendor/README.md): from the table made once per module when it
        // is there, else from `index` as before (which panics for a function that is not there).
        let loc = self.defined_func_loc(key).unwrap_or_else(|| self.func_loc(key));
        let start = usize::try_from(loc.start).unwrap();
        let end = usize::try_from(loc.start + loc.length).unwrap();
        start..end
    }

    /// zundoko-operator patch (vendor/README.md): `key`'s location in `defined_func_locs`, if
    /// it is one of this module's defined functions or array-to-wasm trampolines and is there
    /// (a bounds-checked `get`: an index the table does not hold is `None`, not a read).
    #[inline]
    fn defined_func_loc(&self, key: FuncKey) -> Option<&FunctionLoc> {
        let (module, index, array_to_wasm) = match key {
            FuncKey::DefinedWasmFunction(module, index) => (module, index, false),
            FuncKey::ArrayToWasmTrampoline(module, index) => (module, index, true),
            _ => return None,
        };
        if module != self.module_index() {
            return None;
        }
        let locs = self.defined_func_locs.get(wasmtime_environ::EntityRef::index(index))?;
        let loc = if array_to_wasm { &locs.array_to_wasm } else { &locs.wasm };
        if loc.is_empty() { None } else { Some(loc) }
    }

    /// Get the Wasm-to-array trampoline for the given signature, as a
    /// range in the text segment.
    ///
    /// These trampolines are used for filling in
    /// `VMFuncRef::wasm_call` for `Func::wrap`-style host funcrefs
    /// that don't have access to a compiler when created.
    pub fn wasm_to_array_trampoline(&self, signature: ModuleInternedTypeIndex) -> &[u8] {
        let key = FuncKey::WasmToArrayTrampoline(signature);
        let range = self.function_range(key);
        self.engine_code.raw_wasm_to_array_trampoline_data(range)
    }

    /// Lookups a defined function by a program counter value.
    ///
    /// Returns the defined function index and the relative address of
    /// `text_offset` within the function itself.
    pub fn func_by_text_offset(&self, text_offset: usize) -> Option<DefinedFuncIndex> {
        let text_offset = u32::try_from(text_offset).unwrap();
        let key = self.index.func_by_text_offset(text_offset)?;
        match key {
            FuncKey::DefinedWasmFunction(module, def_func_index) => {
                // If this function is for `self` then pass it through,
                // otherwise it's for some other module in this image so
                // there's no `DefinedFuncIndex` for this offset.
                if module == self.module_index() {
                    Some(def_func_index)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Gets the function location information for a given function index.
    pub fn func_loc(&self, key: FuncKey) -> &FunctionLoc {
        self.index
            .func_loc(key)
            .expect("defined function should be present")
    }

    /// Returns the original binary offset in the file that `index` was defined
    /// at.
    pub fn func_start_srcloc(&self, key: FuncKey) -> FilePos {
        self.index
            .src_loc(key)
            .expect("defined function should be present")
    }

    /// Creates a new symbolication context which can be used to further
    /// symbolicate stack traces.
    ///
    /// Basically this makes a thing which parses debuginfo and can tell you
    /// what filename and line number a wasm pc comes from.
    #[cfg(feature = "addr2line")]
    pub fn symbolize_context(&self) -> Result<Option<SymbolizeContext<'_>>> {
        use gimli::EndianSlice;
        if !self.meta.has_wasm_debuginfo {
            return Ok(None);
        }
        let dwarf = gimli::Dwarf::load(|id| -> Result<_> {
            // Lookup the `id` in the `dwarf` array prepared for this module
            // during module serialization where it's sorted by the `id` key. If
            // found this is a range within the general module's concatenated
            // dwarf section which is extracted here, otherwise it's just an
            // empty list to represent that it's not present.
            let data = self
                .meta
                .dwarf
                .binary_search_by_key(&(id as u8), |(id, _)| *id)
                .ok()
                .and_then(|i| {
                    let (_, range) = &self.meta.dwarf[i];
                    let start = range.start.try_into().ok()?;
                    let end = range.end.try_into().ok()?;
                    self.engine_code.wasm_dwarf().get(start..end)
                })
                .unwrap_or(&[]);
            Ok(EndianSlice::new(data, gimli::LittleEndian))
        })?;
        let cx = addr2line::Context::from_dwarf(dwarf)
            .context("failed to create addr2line dwarf mapping context")?;
        Ok(Some(SymbolizeContext {
            inner: cx,
            code_section_offset: self.meta.code_section_offset,
        }))
    }

    /// Returns whether the original wasm module had unparsed debug information
    /// based on the tunables configuration.
    pub fn has_unparsed_debuginfo(&self) -> bool {
        self.meta.has_unparsed_debuginfo
    }

    /// Indicates whether this module came with n address map such that lookups
    /// via `wasmtime_environ::lookup_file_pos` will succeed.
    ///
    /// If this function returns `false` then `lookup_file_pos` will always
    /// return `None`.
    pub fn has_address_map(&self) -> bool {
        !self.engine_code.address_map_data().is_empty()
    }

    /// Returns the original Wasm bytecode for this module, if it is available.
    pub fn bytecode(&self) -> Option<&[u8]> {
        self.engine_code
            .wasm_bytecode_for_module(self.module.module_index)
    }

    pub(crate) fn index(&self) -> &Arc<CompiledFunctionsTable> {
        &self.index
    }
}

#[cfg(feature = "addr2line")]
type Addr2LineContext<'a> = addr2line::Context<gimli::EndianSlice<'a, gimli::LittleEndian>>;

/// A context which contains dwarf debug information to translate program
/// counters back to filenames and line numbers.
#[cfg(feature = "addr2line")]
pub struct SymbolizeContext<'a> {
    inner: Addr2LineContext<'a>,
    code_section_offset: u64,
}

#[cfg(feature = "addr2line")]
impl<'a> SymbolizeContext<'a> {
    /// Returns access to the [`addr2line::Context`] which can be used to query
    /// frame information with.
    pub fn addr2line(&self) -> &Addr2LineContext<'a> {
        &self.inner
    }

    /// Returns the offset of the code section in the original wasm file, used
    /// to calculate lookup values into the DWARF.
    pub fn code_section_offset(&self) -> u64 {
        self.code_section_offset
    }
}

/// zundoko-operator patch (vendor/README.md): the table of defined functions' locations, and
/// that a funcref handed out is still the one written for it right then.
#[cfg(test)]
mod defined_func_locs_tests {
    use crate::runtime::vm::{VMFuncRef, VMOpaqueContext};
    use crate::{AsContextMut, Engine, Func, Instance, Module, Store};
    use core::ptr::NonNull;
    use wasmtime_environ::{
        DefinedFuncIndex, EntityRef, FuncIndex, FuncKey, HostPtr, StaticModuleIndex, VMOffsets,
    };

    // Function 0 is exported, 1 is only in a table, 2 escapes nowhere (so has no array-to-wasm
    // trampoline), 3 calls 1 through the table, 4 hands out 1 with `ref.func`.
    const WAT: &str = r#"
        (module
            (table 1 funcref)
            (elem (i32.const 0) func $in_table)
            (func $exported (export "exported") (result i32) i32.const 42)
            (func $in_table (result i32) i32.const 7)
            (func $internal (result i32) call $exported)
            (func (export "indirect") (result i32) i32.const 0 call_indirect (result i32))
            (func (export "ref") (result funcref) ref.func $in_table)
        )"#;

    fn module() -> Module {
        Module::new(&Engine::default(), WAT).unwrap()
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn the_table_holds_what_the_index_holds() {
        let module = module();
        let compiled = module.compiled_module();
        let index = compiled.module_index();
        let defined = module.env_module().num_defined_funcs();
        assert_eq!(compiled.defined_func_locs.len(), defined);
        for i in 0..defined {
            let i = DefinedFuncIndex::new(i);
            for key in [
                FuncKey::DefinedWasmFunction(index, i),
                FuncKey::ArrayToWasmTrampoline(index, i),
            ] {
                assert_eq!(compiled.defined_func_loc(key), compiled.index.func_loc(key), "{key:?}");
            }
        }
        let internal = DefinedFuncIndex::new(2);
        assert!(compiled.defined_func_loc(FuncKey::DefinedWasmFunction(index, internal)).is_some());
        assert_eq!(compiled.defined_func_loc(FuncKey::ArrayToWasmTrampoline(index, internal)), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn an_index_out_of_the_table_is_refused() {
        let module = module();
        let compiled = module.compiled_module();
        let index = compiled.module_index();
        let other = StaticModuleIndex::from_u32(index.as_u32() + 1);
        for beyond in [5, 1000, u32::MAX - 1] {
            let beyond = DefinedFuncIndex::from_u32(beyond);
            assert_eq!(compiled.defined_func_loc(FuncKey::DefinedWasmFunction(index, beyond)), None);
            assert_eq!(compiled.defined_func_loc(FuncKey::ArrayToWasmTrampoline(index, beyond)), None);
            // `function_range` then asks the index, which panics as it always did.
            let range = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                compiled.function_range(FuncKey::DefinedWasmFunction(index, beyond))
            }));
            assert!(range.is_err(), "{beyond:?} gave {range:?}");
        }
        let first = DefinedFuncIndex::new(0);
        assert_eq!(compiled.defined_func_loc(FuncKey::DefinedWasmFunction(other, first)), None);
    }

    /// Overwrite every funcref slot of the instance's `VMContext` with a pattern, as a reused
    /// allocation would hold an earlier instance's funcrefs.
    fn poison_func_refs(store: &mut Store<()>, instance: &Instance, module: &Module) {
        let offsets = VMOffsets::new(HostPtr, module.env_module());
        let vm_instance = store.as_context_mut().0.instance(instance.id.instance());
        let vmctx = vm_instance.vmctx().cast::<u8>();
        for i in 0..offsets.num_escaped_funcs {
            let at = offsets.vmctx_func_ref(wasmtime_environ::FuncRefIndex::from_u32(i));
            // SAFETY: the slot lies within this instance's `VMContext`, and nothing holds
            // a reference to it yet.
            unsafe {
                vmctx
                    .add(usize::try_from(at).unwrap())
                    .write_bytes(0xa5, size_of::<VMFuncRef>())
            };
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_funcref_is_written_right_before_it_is_handed_out() {
        let module = module();
        let mut store = Store::new(module.engine(), ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        poison_func_refs(&mut store, &instance, &module);

        let compiled = module.compiled_module();
        let env = module.env_module();
        let offsets = VMOffsets::new(HostPtr, env);
        for func in [FuncIndex::from_u32(0), FuncIndex::from_u32(1)] {
            let def = env.defined_func_index(func).unwrap();
            let (_, registry, vm_instance) = store
                .as_context_mut()
                .0
                .optional_gc_store_and_registry_and_instance_mut(instance.id.instance());
            let text = registry.store_code(module.engine_code()).unwrap().text().as_ptr();
            let vmctx = vm_instance.vmctx();
            let handed = vm_instance.get_func_ref(registry, func).unwrap();
            let slot = offsets.vmctx_func_ref(env.functions[func].func_ref);
            assert_eq!(handed.cast::<u8>(), unsafe { vmctx.cast::<u8>().add(slot as usize) });
            // SAFETY: a funcref handed out points to a `VMFuncRef` in the live instance.
            let func_ref: &VMFuncRef = unsafe { handed.as_ref() };
            let at = |key| {
                let loc = compiled.index.func_loc(key).unwrap();
                text.wrapping_add(loc.start as usize)
            };
            let array = FuncKey::ArrayToWasmTrampoline(compiled.module_index(), def);
            let wasm = FuncKey::DefinedWasmFunction(compiled.module_index(), def);
            assert_eq!(func_ref.array_call.as_ptr().cast::<u8>().cast_const(), at(array));
            assert_eq!(func_ref.wasm_call.unwrap().as_ptr().cast::<u8>().cast_const(), at(wasm));
            assert_eq!(
                func_ref.vmctx.as_non_null(),
                NonNull::from(VMOpaqueContext::from_vmcontext(vmctx)).cast(),
            );
            assert_eq!(func_ref.type_index, env.functions[func].signature.unwrap_engine_type_index());
        }

        // And through the public API, each way a guest or the host gets one: an export, a
        // table's lazily initialised element, `ref.func`.
        poison_func_refs(&mut store, &instance, &module);
        let exported = instance.get_typed_func::<(), i32>(&mut store, "exported").unwrap();
        assert_eq!(exported.call(&mut store, ()).unwrap(), 42);
        poison_func_refs(&mut store, &instance, &module);
        let indirect = instance.get_typed_func::<(), i32>(&mut store, "indirect").unwrap();
        assert_eq!(indirect.call(&mut store, ()).unwrap(), 7);
        poison_func_refs(&mut store, &instance, &module);
        let by_ref = instance.get_typed_func::<(), Option<Func>>(&mut store, "ref").unwrap();
        let in_table = by_ref.call(&mut store, ()).unwrap().unwrap();
        assert_eq!(in_table.typed::<(), i32>(&store).unwrap().call(&mut store, ()).unwrap(), 7);
    }
}
