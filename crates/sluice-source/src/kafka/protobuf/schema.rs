//! A Protobuf schema from the registry, compiled: its `.proto` text (or serialized
//! `FileDescriptorProto`) with the files it imports, which the registry holds as references
//! (fetched by subject and version, transitively), Google's well-known types built in.

use std::collections::HashMap;

use prost_reflect::{FileDescriptor, MessageDescriptor};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use crate::registry::{RegisteredSchema, RegistryError, SchemaRegistry};

/// A compiled schema: its file (in a pool with everything it imports).
pub struct ProtoSchema {
    file: FileDescriptor,
}

impl ProtoSchema {
    /// Compiles `main` with its imports (`files`: reference name → schema). The texts are
    /// the registry's answers, so a panic of the compiler on one is an error here: it would
    /// otherwise stop every run that meets the schema's id.
    pub fn compile(
        main: &RegisteredSchema,
        files: &HashMap<String, RegisteredSchema>,
    ) -> Result<ProtoSchema, String> {
        let compile = std::panic::AssertUnwindSafe(|| ProtoSchema::compile_unguarded(main, files));
        std::panic::catch_unwind(compile).unwrap_or_else(|e| {
            Err(format!(
                "the Protobuf compiler panicked on it: {}",
                crate::reject::panic_message(&e)
            ))
        })
    }

    fn compile_unguarded(
        main: &RegisteredSchema,
        files: &HashMap<String, RegisteredSchema>,
    ) -> Result<ProtoSchema, String> {
        let mut resolver = Files::default();
        for (name, schema) in files {
            resolver
                .0
                .insert(name.clone(), schema_file(name, &schema.text)?);
        }
        let main_file = schema_file(&format!("schema-{}.proto", main.id), &main.text)?;
        let name = main_file.name().to_string();
        resolver.0.insert(name.clone(), main_file);
        let mut chain = ChainFileResolver::new();
        chain.add(resolver);
        chain.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(chain);
        compiler.open_file(&name).map_err(|e| e.to_string())?;
        let file = compiler
            .descriptor_pool()
            .get_file_by_name(&name)
            .ok_or_else(|| format!("{name} is not in its compiled pool"))?;
        Ok(ProtoSchema { file })
    }

    /// The pool of the file and its imports.
    #[cfg(test)]
    pub fn pool(&self) -> &prost_reflect::DescriptorPool {
        self.file.parent_pool()
    }

    /// The message the indexes name: the `[0]`th top-level message, its `[1]`th nested
    /// message, and so on (nested types counted as the file declares them, map entries
    /// included, as Confluent's serializers count).
    pub fn message(&self, indexes: &[i64]) -> Option<MessageDescriptor> {
        let (first, rest) = indexes.split_first()?;
        let mut message = self.file.messages().nth(usize::try_from(*first).ok()?)?;
        for i in rest {
            let child = message.child_messages().nth(usize::try_from(*i).ok()?)?;
            message = child;
        }
        Some(message)
    }
}

/// The files a schema imports, by the names it imports them by.
#[derive(Default)]
struct Files(HashMap<String, File>);

impl FileResolver for Files {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        self.0
            .get(name)
            .cloned()
            .ok_or_else(|| protox::Error::file_not_found(name))
    }
}

/// A registered Protobuf schema's file: `.proto` text, or (as confluent-kafka's Python
/// serializer registers them) a serialized `FileDescriptorProto` in base64, which keeps its
/// own name.
fn schema_file(name: &str, text: &str) -> Result<File, String> {
    use base64::Engine;
    use prost_reflect::prost::Message;
    let looks_base64 = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if looks_base64 {
        if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(text) {
            if let Ok(proto) = prost_reflect::prost_types::FileDescriptorProto::decode(&*bytes) {
                let mut proto = proto;
                if proto.name().is_empty() {
                    proto.name = Some(name.to_string());
                }
                return Ok(File::from_file_descriptor_proto(proto));
            }
        }
    }
    File::from_source(name, text).map_err(|e| e.to_string())
}

/// `main` compiled with the files it imports, fetched from the registry (transitively); or
/// why it cannot be (an import the registry does not have, too many, a compile error).
pub async fn compile_with_references(
    registry: &mut SchemaRegistry,
    main: &RegisteredSchema,
) -> Result<Result<ProtoSchema, String>, RegistryError> {
    let files = match registry.references(main).await? {
        Ok(files) => files,
        Err(why) => return Ok(Err(why)),
    };
    let files: HashMap<String, RegisteredSchema> = files
        .into_iter()
        .map(|(reference, schema)| (reference.name, schema))
        .collect();
    Ok(ProtoSchema::compile(main, &files)
        .map_err(|e| format!("schema id {} does not compile: {e}", main.id)))
}
