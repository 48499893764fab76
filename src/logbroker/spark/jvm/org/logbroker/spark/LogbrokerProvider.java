package org.logbroker.spark;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Format {@code logbroker} on the JVM: the same name, schema and options
 * as the Python source (spark/source.py), which stays the fallback and
 * serves what this connector hands to it (streams, writes, bootstrap reads
 * without {@code paths}, {@code engine=python}).
 *
 * <p>A plain {@code df.write.format("logbroker").save()} (Spark's default
 * save mode, errorifexists) lands in {@link #createRelation}, which appends
 * as Spark's Kafka sink does; overwrite is refused as by the Python sink.
 */
public final class LogbrokerProvider
    implements TableProvider, DataSourceRegister, CreatableRelationProvider {

  @Override
  public String shortName() {
    return "logbroker";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Schemas.full(Schemas.includeHeaders(options));
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new LogbrokerTable(schema, partitioning, properties);
  }

  @Override
  public BaseRelation createRelation(SQLContext sqlContext, SaveMode mode,
                                     scala.collection.immutable.Map<String, String> parameters,
                                     Dataset<Row> data) {
    if (mode == SaveMode.Overwrite) {
      throw new IllegalArgumentException("the logbroker sink only appends to topics: use "
          + "mode(\"append\"), not mode(\"overwrite\")");
    }
    Map<String, String> options = new HashMap<>(CollectionConverters.asJava(parameters));
    if (mode == SaveMode.ErrorIfExists || mode == SaveMode.Append) {
      data.write().format("logbroker").mode(SaveMode.Append).options(options).save();
    }
    StructType schema = data.schema();
    return new BaseRelation() {
      @Override
      public SQLContext sqlContext() {
        return sqlContext;
      }

      @Override
      public StructType schema() {
        return schema;
      }
    };
  }
}
